"""scikit-learn estimators of skrank."""

from .average_precision import AveragePrecisionClassifier
from .partial_auc import PartialAUCClassifier
from .rank_admm import RankADMMClassifier, RankADMMRegressor
from .spectral_risk import SpectralRiskClassifier, SpectralRiskRegressor

__all__ = [
    "AveragePrecisionClassifier",
    "PartialAUCClassifier",
    "RankADMMClassifier",
    "RankADMMRegressor",
    "SpectralRiskClassifier",
    "SpectralRiskRegressor",
]
