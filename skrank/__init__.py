"""skrank: rank-based learning objectives for scikit-learn linear models."""

from .estimators import (
    AveragePrecisionClassifier,
    AveragePrecisionClassifierCV,
    PartialAUCClassifier,
    PartialAUCClassifierCV,
    RankADMMClassifier,
    RankADMMRegressor,
    SpectralRiskClassifier,
    SpectralRiskRegressor,
)
from .risks import (
    ERM,
    CVaR,
    ExponentialSpectral,
    Extremile,
    HumanAligned,
    RankedRange,
    Superquantile,
    TopK,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "AveragePrecisionClassifier",
    "AveragePrecisionClassifierCV",
    "ERM",
    "CVaR",
    "ExponentialSpectral",
    "Extremile",
    "HumanAligned",
    "PartialAUCClassifier",
    "PartialAUCClassifierCV",
    "RankADMMClassifier",
    "RankADMMRegressor",
    "RankedRange",
    "SpectralRiskClassifier",
    "SpectralRiskRegressor",
    "Superquantile",
    "TopK",
]
