"""wattbench: measure how much work a server does per watt."""

__version__ = "0.1.0"
