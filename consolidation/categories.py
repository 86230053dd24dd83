"""Category retractions, as data: "No longer likes eating any fruit" against "Likes apples and
strawberries".

A memory that negates or retracts a *category* ("no longer eats any meat", "trinkt keinen
Alkohol mehr", "ne boit plus d'alcool", "ya no come fruta") says something about every older
memory of the same scope that affirms a *member* of it ("eats chicken on Sundays", "Bob drinks
beer and wine"). The two share no value word and score low (all-MiniLM-L6-v2: 0.61 for the
fruit pair above), so neither the same-slot rule (:mod:`consolidation.slots`) nor the event rule
(:mod:`consolidation.events`) links them, and the older memory stayed live beside its
retraction, silently. The rules cannot be sure the retraction ends all of it (the older text may
say more, or the retraction may be about a moment), so the pair is **asked**
(:func:`category_ruling`: a ``"conflict"``), never settled.

One row per category: ``lang`` (ISO 639-1), the category's ``words`` (any of them names it; a
word of several tokens needs them all), its ``members`` and the ``source`` (the English
Wiktionary entry whose hyponyms or translations list them, ``wiktionary:<page>``). Words are
compared as :func:`consolidation.text.parse` tokens (folded, stemmed, an elided article cut:
"d'alcool" is "alcool"), in the languages of the cue table this module covers first (en de fr
es); a missing member only means the pair is judged by the other rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .text import Parsed, parse

__all__ = [
    "CATEGORIES",
    "MAX_TOKENS",
    "Category",
    "category_link",
    "category_ruling",
    "retracts_a_category",
]


@dataclass(frozen=True)
class Category:
    """One category row (module docstring): ``lang``, ``words`` naming it, ``members`` and
    ``source``, each word a space-separated phrase as written."""

    lang: str
    words: tuple[str, ...]
    members: tuple[str, ...]
    source: str


def _row(lang: str, words: str, members: str, source: str) -> Category:
    return Category(lang, tuple(words.split(",")), tuple(members.split(",")), source)


CATEGORIES: tuple[Category, ...] = (
    _row(
        "en",
        "fruit,fruits",
        "apple,apples,banana,bananas,orange,oranges,strawberry,strawberries,grape,grapes,pear,"
        "pears,peach,peaches,cherry,cherries,mango,mangoes,pineapple,blueberries,raspberries,"
        "watermelon,melon,kiwi,plum,plums",
        "wiktionary:fruit",
    ),
    _row(
        "de",
        "obst,früchte",
        "apfel,äpfel,banane,bananen,erdbeere,erdbeeren,birne,birnen,kirsche,kirschen,trauben",
        "wiktionary:Obst",
    ),  # fmt: skip
    _row(
        "fr",
        "fruit,fruits",
        "pomme,pommes,banane,bananes,fraise,fraises,poire,poires,cerise,cerises,raisin",
        "wiktionary:fruit",
    ),  # fmt: skip
    _row(
        "es",
        "fruta,frutas",
        "manzana,manzanas,plátano,plátanos,fresa,fresas,pera,peras,cereza,cerezas,uvas",
        "wiktionary:fruta",
    ),  # fmt: skip
    _row(
        "en",
        "meat",
        "beef,pork,chicken,lamb,bacon,ham,steak,steaks,sausage,sausages,turkey,burger,burgers",
        "wiktionary:meat",
    ),
    _row(
        "de",
        "fleisch",
        "rindfleisch,schweinefleisch,hähnchen,huhn,wurst,würstchen,schinken,speck,steak",
        "wiktionary:Fleisch",
    ),  # fmt: skip
    _row(
        "fr",
        "viande",
        "bœuf,boeuf,porc,poulet,agneau,jambon,saucisse,saucisses,steak",
        "wiktionary:viande",
    ),  # fmt: skip
    _row(
        "es",
        "carne",
        "ternera,cerdo,pollo,cordero,jamón,salchicha,salchichas,bistec",
        "wiktionary:carne",
    ),  # fmt: skip
    _row(
        "en",
        "fish,seafood",
        "salmon,tuna,cod,trout,sushi,shrimp,prawns,crab,lobster,oysters",
        "wiktionary:seafood",
    ),  # fmt: skip
    _row(
        "en",
        "dairy",
        "milk,cheese,yogurt,yoghurt,butter,cream,ice cream",
        "wiktionary:dairy product",
    ),
    _row(
        "en",
        "alcohol,alcoholic drinks,booze",
        "beer,beers,wine,wines,whisky,whiskey,vodka,gin,rum,tequila,champagne,cocktails,cider",
        "wiktionary:alcoholic beverage",
    ),
    _row("de", "alkohol", "bier,wein,schnaps,sekt,whisky,wodka", "wiktionary:Alkohol"),
    _row("fr", "alcool", "bière,vin,champagne,whisky,vodka,cidre", "wiktionary:alcool"),
    _row("es", "alcohol", "cerveza,vino,whisky,vodka,tequila,sidra", "wiktionary:alcohol"),
    _row(
        "en",
        "coffee,caffeine",
        "espresso,latte,cappuccino,cortado,flat white,americano,mocha,macchiato",
        "wiktionary:coffee",
    ),
    _row(
        "en",
        "sweets,sugar,dessert,desserts",
        "chocolate,candy,cake,cakes,cookies,donuts,doughnuts,pastries,ice cream",
        "wiktionary:sweets",
    ),
    _row(
        "en",
        "sport,sports",
        "football,soccer,tennis,basketball,baseball,golf,hockey,volleyball,rugby,cricket",
        "wiktionary:sport",
    ),
    _row(
        "en",
        "social media",
        "facebook,instagram,twitter,tiktok,snapchat,reddit,linkedin",
        "wiktionary:social media",
    ),
)
"""The category table (module docstring)."""


def _elided(tok: str) -> str:
    """A token without an elided French article ("d'alcool" → "alcool")."""
    return tok.split("'", 1)[1] if len(tok) > 2 and tok[1] == "'" else tok


@lru_cache(maxsize=4096)
def _phrase(words: str) -> frozenset[str]:
    return frozenset(_elided(t) for t in parse(words).tokens)


@lru_cache(maxsize=1)
def _table() -> tuple[
    tuple[str, tuple[frozenset[str], ...], tuple[tuple[str, frozenset[str]], ...]], ...
]:
    """Each row as (its first word, the token sets naming it, each member with its tokens)."""
    return tuple(
        (
            c.words[0],
            tuple(s for s in map(_phrase, c.words) if s),
            tuple((m, _phrase(m)) for m in c.members if _phrase(m)),
        )
        for c in CATEGORIES
    )


def _tokens(p: Parsed) -> frozenset[str]:
    return frozenset(_elided(t) for t in p.tokens)


MAX_TOKENS = 12
"""Content tokens a text of a category pair may have: a retraction is one short statement, not
a summary that happens to hold a "not" and a category word (LoCoMo's session summaries asked
eight such questions before this bound; the table's pairs have 2–6)."""


def _retracts(p: Parsed) -> bool:
    return bool(p.negations % 2 or p.past_state) and len(p.tokens) <= MAX_TOKENS


def _match(pr: Parsed, ps: Parsed) -> tuple[str, list[str]] | None:
    """``(category, members named)`` when ``pr`` retracts a category whose members the
    affirmative ``ps`` names, sharing one more content word (the predicate: "likes"); else
    ``None``."""
    if not _retracts(pr) or ps.negations % 2 or ps.past_state or len(ps.tokens) > MAX_TOKENS:
        return None
    tr, ts = _tokens(pr), _tokens(ps)
    for word, names, members in _table():
        named = [s for s in names if s <= tr]
        if not named or any(s <= ts for s in names):
            continue
        found = [(m, toks) for m, toks in members if toks <= ts]
        if not found:
            continue
        own = frozenset().union(*named, *(toks for _, toks in found))
        if (tr & ts) - own:
            return word, list({toks: m for m, toks in reversed(found)}.values())[::-1]
    return None


def retracts_a_category(p: Parsed) -> bool:
    """True when ``p`` negates or retracts a text that names a category of the table ("no
    longer eats any meat"): the update channel searches its nearest rows at a low cosine."""
    if not _retracts(p):
        return False
    toks = _tokens(p)
    return any(s <= toks for _, names, _ in _table() for s in names)


def category_link(a: Parsed, b: Parsed) -> bool:
    """True when one of ``a``/``b`` retracts a category the other names members of
    (:func:`category_ruling` would ask): the update channel offers such a pair
    (:mod:`consolidation.planning.updates`) although it shares only the predicate."""
    return _match(a, b) is not None or _match(b, a) is not None


def category_ruling(
    a: str, b: str, pa: Parsed, pb: Parsed, *, kinds: tuple[str, str] = ("state", "state")
) -> tuple[str, None, str, tuple[str, ...]] | None:
    """The category rule for texts ``a`` and ``b`` (parsed as ``pa``, ``pb``; ``kinds`` their
    :func:`consolidation.judgment.statement_kind`): a ``("conflict", None, "category",
    reasons)`` ruling (:data:`consolidation.slots.Ruling`) when one retracts a category the
    other names members of, else ``None`` — also when either is an event or a reading (a date,
    a past tense: "drank wine at the party" happened, whatever holds now). Never raises."""
    if "event" in kinds:
        return None
    for pr, ps, which in ((pa, pb, "first"), (pb, pa, "second")):
        hit = _match(pr, ps)
        if hit is not None:
            word, members = hit
            return (
                "conflict",
                None,
                "category",
                (
                    f"the {which} memory retracts a category ({word}) the other names members "
                    f"of ({', '.join(members)})",
                    "whether the retraction ends what the other says is asked",
                ),
            )
    return None
