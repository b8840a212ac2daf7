"""
Two-way partial AUC: a sensitivity floor and a false-alarm ceiling
==================================================================

A screening model is often judged where it is usable: it must catch at
least a given share of the positives (a true-positive-rate floor,
``tpr_min``) without raising more than a given share of false alarms (a
false-positive-rate ceiling, ``fpr_max``).  The two-way partial AUC is the
area under the ROC curve inside that corner, divided by the corner's area
(:func:`skrank.metrics.two_way_partial_auc_score`).

:class:`~skrank.PartialAUCClassifier` with ``tpr_min`` fits it: only the
positives ranked in the bottom ``1 - tpr_min`` of the positives and the
negatives ranked in the top ``fpr_max`` of the negatives enter its pairwise
surrogate.  This example fits it and a ``LogisticRegression`` on the
``churn`` table and draws both held-out ROC curves with the region shaded.
"""

# %%
# Data and models
# ---------------
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_curve
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrank import PartialAUCClassifier
from skrank.datasets import load_tabular
from skrank.metrics import two_way_partial_auc_score

TPR_MIN, FPR_MAX = 0.5, 0.3

X, y = load_tabular("churn")
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5, stratify=y, random_state=0)
models = {
    "LogisticRegression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
    "PartialAUCClassifier": make_pipeline(
        StandardScaler(), PartialAUCClassifier(fpr_range=(0.0, FPR_MAX), tpr_min=TPR_MIN)),
}
for model in models.values():
    model.fit(X_train, y_train)

# %%
# ROC curves with the two-way region shaded
# -----------------------------------------
# The score is the part of the shaded rectangle that lies under the curve.
fig, ax = plt.subplots(figsize=(6, 5))
ax.add_patch(Rectangle((0.0, TPR_MIN), FPR_MAX, 1.0 - TPR_MIN, color="tab:orange", alpha=0.15,
                       label=f"TPR >= {TPR_MIN}, FPR <= {FPR_MAX}"))
for (name, model), color in zip(models.items(), ["tab:blue", "tab:red"]):
    scores = model.decision_function(X_test)
    fpr, tpr, _ = roc_curve(y_test, scores)
    score = two_way_partial_auc_score(y_test, scores, tpr_min=TPR_MIN, fpr_max=FPR_MAX)
    ax.plot(fpr, tpr, color=color, label=f"{name} (two-way pAUC {score:.3f})")
    print(f"{name}: held-out two-way partial AUC {score:.4f}")
ax.plot([0, 1], [0, 1], color="0.6", linestyle=":", linewidth=1)
ax.set(xlabel="false-positive rate", ylabel="true-positive rate", xlim=(0, 1), ylim=(0, 1.01),
       title="churn, held-out half")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()
