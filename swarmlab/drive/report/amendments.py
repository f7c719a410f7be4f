"""Protocol amendments (``swarmlab/drive/report/amendments.yaml``): every change to a claim's decisive experiment made after
it started, with its reason and the verdict before and after. The report shows them on its first screen, the ones
made after results that moved the verdict toward the claim first; an entry is never removed (undoing one is
``status: withdrawn: <why>``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from swarmlab.drive.params import load_yaml
from swarmlab.errors import SwarmlabError

AMENDMENTS_FILE = Path(__file__).with_name("amendments.yaml")
FIELDS = ("id", "claims", "date", "change", "reason", "after_results", "toward_claim", "before", "after", "status")


@dataclasses.dataclass(frozen=True)
class Amendment:
    id: str
    claims: tuple[str, ...]
    date: str
    change: str
    reason: str
    after_results: bool
    toward_claim: bool | None
    before: str
    after: str
    status: str

    @property
    def standing(self) -> bool:
        return not self.status.startswith("withdrawn")

    @property
    def alarming(self) -> bool:
        """Made after results were seen, and moved the verdict toward the claim: what a reviewer looks at first."""
        return self.after_results and self.toward_claim is True


def load_amendments(path: Path = AMENDMENTS_FILE, claim_ids: set[str] | None = None) -> list[Amendment]:
    """The amendments, checked: every field present, ids unique, claims known (when ``claim_ids`` is given)."""
    try:
        data = load_yaml(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SwarmlabError(f"{path}: cannot be read as YAML ({exc})") from None
    out, seen = [], set()
    for i, entry in enumerate(data.get("amendments") or []):
        missing = [f for f in FIELDS if not isinstance(entry, dict) or f not in entry]
        if missing:
            raise SwarmlabError(f"{path}: amendment {i + 1} lacks {', '.join(missing)}")
        if entry["id"] in seen:
            raise SwarmlabError(f"{path}: amendment id {entry['id']} appears twice")
        seen.add(entry["id"])
        unknown = [c for c in entry["claims"] if claim_ids is not None and c not in claim_ids]
        if unknown:
            raise SwarmlabError(f"{path}: amendment {entry['id']} names unknown claims {unknown}")
        out.append(Amendment(**{**entry, "claims": tuple(entry["claims"])}))
    return out
