"""Exceptions a meter driver raises, each mapped to the sample flag the contract defines for it.

The sampler catches these, puts the flag on the sample and never invents a value.
"""

from wattbench_fw.contract import FLAG_CRC, FLAG_MISSED, FLAG_SENSOR_ERROR


class MeterError(Exception):
    flag = FLAG_SENSOR_ERROR


class NoReply(MeterError):
    """The meter did not answer within its timeout."""

    flag = FLAG_MISSED


class CRCError(MeterError):
    """A frame arrived but its checksum is wrong."""

    flag = FLAG_CRC


class FrameError(MeterError):
    """A frame arrived but is malformed (length, address, function, syntax): same as a bad CRC."""

    flag = FLAG_CRC


class SensorError(MeterError):
    """The device answered and reported an error, or returned a value it marks as invalid."""

    flag = FLAG_SENSOR_ERROR


class ConfigError(ValueError):
    """The configuration file is invalid; the message says where and why."""
