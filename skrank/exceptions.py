"""Warnings of skrank's estimators."""


class ConstantOptimumWarning(UserWarning):
    """The optimum of a fit is the constant classifier: ``coef_`` is zero for a problem.

    Raised by ``SpectralRiskClassifier`` and ``RankADMMClassifier`` when the
    fit converged and a problem's (a class's, one-vs-rest) coefficients
    are zero: every sample gets the same score, so the model ranks nothing
    and ``predict`` returns one class for that problem.  The solver is not
    at fault (no more iterations change it): the objective, the risk, the
    loss and the penalty with this data, is minimised by not ranking.  A
    tail risk at a high level (``Superquantile(q=0.8)``) does that where
    the classes overlap, since any ranking raises the largest losses of
    the overlap.  A :class:`UserWarning` like scikit-learn's
    ``UndefinedMetricWarning``, not a ``ConvergenceWarning``, which means
    a solver that stopped short of its optimum.
    """


__all__ = ["ConstantOptimumWarning"]
