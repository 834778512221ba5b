"""The annex's subcommands of `repro`; repro.cli assembles them with the core's."""
