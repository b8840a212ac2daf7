"""Parameter descriptions shared by the docstrings of the stochastic and splitting solvers.

A solver's docstring names a shared block by its key in braces, ``{datafit}``,
and :func:`fill_doc` writes the block in, so that :func:`help` and the API
documentation show every parameter.  Other braces are left alone.
"""

from ..._docs import filling

_UNITS = "skrank.solvers.stochastic.units.FeatureUnits"

SHARED = {
    "datafit": """datafit : skrank.datafits.rank_risk.RankRisk
        The training set (``X``: ndarray or sparse matrix; ``y``: labels in
        {-1, +1} for classification losses, targets otherwise), the risk, the
        loss and whether to fit an intercept.""",
    "labelled_batch": """X : {ndarray, sparse matrix} of shape (n, d)
    y : ndarray of shape (n,)
        Labels in {-1, +1}.""",
    "scale_free": f"""in the standardised units of :class:`{_UNITS}` (so that
        ``X * s`` with the penalty rescaled gives ``coef / s`` and the same
        iterates); a float is a step in the units of ``X``.""",
    "epoch_tol": """tol : float, default=1e-6
        Stop when the relative change of the objective over each of the
        last five epochs is at most ``tol`` (one epoch's change is at most
        ``tol`` by chance when the noisy objective crosses its previous
        value; :class:`skrank.solvers.stochastic.epochs.EpochLog`).  A given
        ``learning_rate`` smaller than the automatic step divides the
        changes by their ratio (the smallest over the coefficients).""",
    "seed_start_verbose": """random_state : int, RandomState, Generator or None
        Seed of the sampling.
    coef_init, intercept_init : ndarray, float or None
        Starting point (zeros by default).
    verbose : int, default=0
        Print one line per epoch when positive.""",
    "epoch_result": """SolverResult
        ``objective_history`` holds ``F`` at the start and after every
        epoch; ``info`` holds ``times``""",
}


#: The decorator that writes the blocks of :data:`SHARED` into a solver's docstring.
fill_doc = filling(SHARED)
