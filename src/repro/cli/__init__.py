"""The `repro` command line: a thin layer over the library; every subcommand calls one function.
The core's commands are here (data, training, status), the annex's in its feature folders
(repro.annex.<feature>.cli); repro.cli.assembly puts them together.
"""
