"""The agent form's policy fields: every field explained, defaults read from `Policy` itself."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from consolidation import Policy
from memoryadmin.agents.forms.agents import AgentEditForm

pytestmark = pytest.mark.django_db


def test_it_gives_every_policy_field_help_text():
    form = AgentEditForm()
    missing = [f.name for f in fields(Policy) if not form.fields[f"policy_{f.name}"].help_text]
    assert missing == []


@pytest.mark.parametrize("name", [f.name for f in fields(Policy)])
def test_it_states_the_default_the_policy_really_has(name):
    text = AgentEditForm().fields[f"policy_{name}"].help_text
    said = re.search(r"default ([^;,)]+)", text)
    default = getattr(Policy(), name)
    if said is None or isinstance(default, bool):
        return
    shown = said.group(1).strip("“”")
    assert shown == (str(default) if isinstance(default, str) else f"{default:g}")


def test_it_names_the_budget_option_in_words_and_has_it_on_by_default():
    field = AgentEditForm().fields["policy_trim_to_guard"]
    assert field.label == "Plan within the loss budget"
    assert field.initial is True and "defer" in field.help_text
