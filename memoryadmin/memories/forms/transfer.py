"""Forms of the transfer: a JSONL upload to import on the worker."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

__all__ = ["JsonlUploadForm"]


class JsonlUploadForm(forms.Form):
    """Upload a JSONL memory file (validated by the importer, line by line)."""

    file = forms.FileField(
        label="JSONL file",
        help_text=(
            "One JSON object per line: id, document, optional metadata and embedding (UTF-8)."
        ),
    )
    skip_invalid = forms.BooleanField(
        required=False,
        label="Skip invalid lines",
        help_text="Write the valid lines and list the others (otherwise nothing is written when "
        "any line is invalid).",
    )

    def clean_file(self) -> Any:
        """Refuse a file over ``settings.MEMORYADMIN_MAX_UPLOAD_BYTES`` (before it is queued)."""
        upload = self.cleaned_data["file"]
        cap = settings.MEMORYADMIN_MAX_UPLOAD_BYTES
        if upload.size > cap:
            raise forms.ValidationError(
                f"The file is {upload.size / 2**20:,.1f} MB; uploads are limited to "
                f"{cap / 2**20:,.0f} MB (MEMORYADMIN_MAX_UPLOAD_MB). Import larger files with "
                "manage.py import_memories."
            )
        return upload
