"""Every text-like input of the agent forms is sized by the stylesheet: the
New agent form's embedder URL field was an ``<input type=url size=60>`` the stylesheet did not
size, and it overflowed its column."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.forms.widgets import Input

from memoryadmin.agents.forms.agents import AgentCreateForm, AgentEditForm

CSS = Path(__file__).resolve().parents[2] / "static" / "css" / "app.css"


def _sized_input_types() -> set[str]:
    """The input types of the stylesheet's rule that sets ``width: 100%; max-width: …``."""
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", CSS.read_text()):
        if "width: 100%" in body and "max-width" in body and "input[type=" in selectors:
            return set(re.findall(r"input\[type=(\w+)\]", selectors))
    return set()


@pytest.mark.parametrize("form_class", [AgentCreateForm, AgentEditForm])
def test_every_text_like_input_is_sized_to_its_column(form_class, db) -> None:
    sized = _sized_input_types()
    form = form_class()
    for name, field in form.fields.items():
        widget = field.widget
        if isinstance(widget, Input) and widget.input_type not in ("checkbox", "hidden"):
            assert widget.input_type in sized, (name, widget.input_type)
            assert "size" not in widget.attrs, name  # a size attribute outgrows the column
