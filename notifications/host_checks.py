"""Django system checks of the host's templates for Sluice.

sluice.W003  a kind's template exists only under a spelling Sluice does not read (dots kept in the kind's name).
"""

from django.core.checks import Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.template import TemplateDoesNotExist
from django.template.loader import get_template


def _exists(name):
    try:
        get_template(name)
    except TemplateDoesNotExist:
        return False
    return True


@register(Tags.templates)
def check_template_spelling(app_configs=None, **kwargs):
    """sluice.W003: sluice/weekly.summary.txt (or sluice/digest/weekly.summary.txt) is there but Sluice reads
    sluice/weekly_summary.txt: the kind would silently render with the generic template."""
    from pipeline.conf import sluice_settings

    try:
        kinds = sluice_settings().kinds
    except ImproperlyConfigured:
        return []  # sluice.E001
    warnings = []
    for kind in kinds.values():
        for read, folder in ((kind.template, "sluice/"), (kind.digest_template, "sluice/digest/")):
            other = f"{folder}{kind.name}.txt"
            if read == other or not read.startswith(folder) or _exists(read) or not _exists(other):
                continue
            warnings.append(
                Warning(
                    f"kind {kind.name!r}: the template {other} exists, but Sluice reads {read} (the kind's name with "
                    "dots as underscores), so this kind renders with the generic template",
                    hint=f"Rename {other} to {read}.",
                    id="sluice.W003",
                )
            )
    return warnings
