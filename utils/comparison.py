"""The one error measure of the compare_*.py scripts."""
import numpy as np


def relative_error(got, want):
    """max |got - want| over max |want| (a tensor's largest entry, or a
    scalar's own size); a zero reference does not divide by zero."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))
