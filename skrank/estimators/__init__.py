"""scikit-learn estimators of skrank."""

from .average_precision import AveragePrecisionClassifier
from .cv import AveragePrecisionClassifierCV, PartialAUCClassifierCV
from .partial_auc import PartialAUCClassifier
from .rank_admm import RankADMMClassifier, RankADMMRegressor
from .spectral_risk import SpectralRiskClassifier, SpectralRiskRegressor

__all__ = [
    "AveragePrecisionClassifier",
    "AveragePrecisionClassifierCV",
    "PartialAUCClassifier",
    "PartialAUCClassifierCV",
    "RankADMMClassifier",
    "RankADMMRegressor",
    "SpectralRiskClassifier",
    "SpectralRiskRegressor",
]
