"""repro: reproduce 'Beyond Linearity in Attention Projections: The Case for Nonlinear Queries'."""

__version__ = "0.2.0"
