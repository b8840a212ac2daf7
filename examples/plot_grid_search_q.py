"""
Choosing the superquantile level with GridSearchCV
==================================================

A risk is a parameter object of the estimator, so its parameters are tuned
like any other: the level ``q`` of a :class:`~skrank.risks.Superquantile`
inside a pipeline is ``spectralriskclassifier__risk__q``.  This example searches
``q`` for a :class:`~skrank.SpectralRiskClassifier` on the ``churn`` table
by five-fold cross-validation, scored by the partial AUC over the false
positive rates 0.05 to 0.5 (:func:`skrank.metrics.make_partial_auc_scorer`),
and plots the mean score against ``q`` with its spread over the folds.
``q = 0`` is the mean loss, ordinary empirical risk minimisation.
"""

# %%
# The search
# ----------
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank import SpectralRiskClassifier, Superquantile
from skrank.datasets import load_tabular
from skrank.metrics import make_partial_auc_scorer

X, y = load_tabular("churn")
pipeline = make_pipeline(StandardScaler(), SpectralRiskClassifier(risk=Superquantile(), alpha=1e-3))
levels = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
search = GridSearchCV(
    pipeline,
    {"spectralriskclassifier__risk__q": levels},
    scoring=make_partial_auc_scorer(fpr_range=(0.05, 0.5)),
    cv=StratifiedKFold(n_splits=5, shuffle=True, random_state=0),
)
# At the largest levels the fit collapses to (nearly) the constant model,
# where all the losses tie; there the Newton method can stop a hair above
# its tolerance and warn.  The collapse is the subject of the last cell.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    search.fit(X, y)
print("best q:", search.best_params_["spectralriskclassifier__risk__q"],
      f"(mean CV partial AUC {search.best_score_:.3f})")

# %%
# Mean score against the level
# ----------------------------
mean = search.cv_results_["mean_test_score"]
std = search.cv_results_["std_test_score"]
fig, ax = plt.subplots(figsize=(6.5, 4.5))
ax.errorbar(levels, mean, yerr=std, fmt="o-", capsize=3)
ax.axhline(mean[0], color="0.6", linestyle=":", linewidth=1, label="q = 0 (ERM)")
ax.set(xlabel="superquantile level q", ylabel="CV partial AUC over FPR (0.05, 0.5)",
       title="SpectralRiskClassifier on churn (mean and std over 5 folds)")
ax.legend(loc="lower left")
fig.tight_layout()

# %%
# Moderate levels rank the churners a little better than the mean loss,
# by less than the spread over the folds.  Past ``q = 0.6`` the score
# falls apart.  Refitting on the whole table shows why: the coefficients
# shrink as ``q`` grows, to nearly zero from ``q = 0.7`` on, where the
# objective reaches the logistic loss of the constant model, ``log 2``.
# Once the worst ``1 - q`` share of the losses is not much larger than the
# share of churners (14%), no linear scorer makes those losses smaller on
# average than the constant model does; by ``q = 0.8`` what is left of the
# ranking comes from coefficients of the size of rounding errors.
model = search.best_estimator_
for q in levels:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.set_params(spectralriskclassifier__risk__q=q).fit(X, y)
    print(f"q = {q:.1f}: norm of the coefficients {np.linalg.norm(model[-1].coef_):8.2g}, "
          f"objective {model[-1].objective_:.4f}")
print(f"log 2 = {np.log(2):.4f}")
plt.show()
