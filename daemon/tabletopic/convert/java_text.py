"""Values as Java prints them, for the places Connect's or the Iceberg sink's output depends on it."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np


def java_double(value: float, single: bool = False) -> str:
    """``Double.toString`` (or ``Float.toString``): plain from 10^-3 up to 10^7, else d.dddEn."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    # The shortest decimal form that reads back as the same float (as Java since 19; Java 17 may print
    # a digit more for a few values).
    digits = Decimal(np.format_float_positional(np.float32(value), unique=True) if single else repr(value))
    if Decimal("0.001") <= abs(digits) < Decimal(10_000_000):
        plain = format(digits.normalize(), "f")
        return plain if "." in plain else plain + ".0"
    sign, numbers, exponent = digits.normalize().as_tuple()
    mantissa = "".join(map(str, numbers))
    power = len(mantissa) - 1 + int(exponent)
    return ("-" if sign else "") + mantissa[0] + "." + (mantissa[1:] or "0") + f"E{power}"
