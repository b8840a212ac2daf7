"""
The weights of the risks
========================

Every risk of :mod:`skrank.risks` sorts the individual losses
``L_(1) <= ... <= L_(n)`` and takes the weighted sum ``sum_i sigma_i L_(i)``;
``risk.weights(n)`` returns the ``sigma``.  The empirical risk (ERM) gives
every loss ``1/n``; the others move weight from the small losses to the
large ones, or away from both ends.

This example draws ``n * sigma_i`` (the weight relative to the mean's
``1/n``) against the rank fraction ``i / n`` of the loss, for the losses of a
logistic regression on the ``churn`` table.  Only the human-aligned risk
looks at the loss values; the weights of the others depend on ``n`` alone.
"""

# %%
# Losses to weigh
# ---------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank.datasets import load_tabular
from skrank.risks import (
    ERM,
    ExponentialSpectral,
    Extremile,
    HumanAligned,
    RankedRange,
    Superquantile,
    TopK,
)

X, y = load_tabular("churn")
model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(X, y)
margins = np.where(y == 1, 1.0, -1.0) * model.decision_function(X)
losses = np.sort(np.logaddexp(0.0, -margins))  # logistic losses, ascending
n = losses.shape[0]
rank = np.arange(1, n + 1) / n
print(f"n = {n} logistic losses, from {losses[0]:.2g} to {losses[-1]:.2g}")

# %%
# Spectral risks
# --------------
# Nondecreasing weights: a larger loss never weighs less than a smaller
# one, so the objective stays convex for a convex loss.  The
# superquantile at level ``q`` (also called CVaR) is the mean of the
# largest ``1 - q`` share of the losses; the extremile and the exponential
# risk raise the weights smoothly.
spectral = {
    "ERM": ERM(),
    "Superquantile(q=0.5)": Superquantile(q=0.5),
    "Superquantile(q=0.8)": Superquantile(q=0.8),
    "Extremile(r=3)": Extremile(r=3.0),
    "ExponentialSpectral(rho=4)": ExponentialSpectral(rho=4.0),
}
# %%
# Other rank risks
# ----------------
# The top-k average is spectral too.  The ranked-range average drops the
# largest losses (``m``, outliers) as well as the smallest ones, and the
# human-aligned risk (cumulative prospect theory) weighs both ends of the
# ranking more than the middle, with a jump where the losses cross its
# reference point; neither is convex.
others = {
    "TopK(k=0.3)": TopK(k=0.3),
    "RankedRange(m=0.05, k=0.5)": RankedRange(m=0.05, k=0.5),
    "HumanAligned()": HumanAligned(),
}

fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
for ax, risks, title in [(axes[0], spectral, "spectral risks"), (axes[1], others, "other rank risks")]:
    for name, risk in risks.items():
        sigma = risk.weights(n, losses) if risk.depends_on_values else risk.weights(n)
        ax.plot(rank, n * sigma, label=f"{name}{'' if risk.is_convex else ' (not convex)'}")
        print(f"{name:28s} sum of weights {sigma.sum():.3f}, largest n*sigma {n * sigma.max():.2f}")
    ax.set(xlabel="rank fraction i / n of the loss (ascending)", title=title)
    ax.legend(loc="upper left", fontsize="small")
axes[0].set(ylabel="n * sigma_i (1 = the mean's weight)", ylim=(0, 6))
fig.tight_layout()
plt.show()
