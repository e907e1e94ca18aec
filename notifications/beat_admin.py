"""django-celery-beat's periodic task admin, with its bulk actions on Sluice's tasks behind the change permission.

django-celery-beat's enable, disable, toggle and run actions declare no permissions, so any staff user who may
view periodic tasks can pause the digest flush and the overflow drain. Sluice does not replace that admin itself:
it belongs to django-celery-beat, and a project may already have registered its own. A project registers this
subclass instead (docs/integrate.md), and `check` warns (sluice.W002) while the registered admin lets the actions
run on Sluice's tasks without the change permission.
"""

from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _
from django_celery_beat.admin import PeriodicTaskAdmin

from pipeline.beat import SLUICE_TASKS

#: The actions that change or run periodic tasks, all of which django-celery-beat allows to viewers.
GUARDED_ACTIONS = ("enable_tasks", "disable_tasks", "toggle_tasks", "run_tasks")


def _guarded(name):
    unguarded = getattr(PeriodicTaskAdmin, name)

    def action(self, request, queryset):
        if not self.has_change_permission(request):
            sluice = sorted(queryset.filter(task__startswith=SLUICE_TASKS).values_list("name", flat=True))
            if sluice:
                self.message_user(
                    request,
                    _("Nothing was changed: %(tasks)s belong to Sluice and need the change permission.")
                    % {"tasks": ", ".join(sluice)},
                    messages.ERROR,
                )
                return None
        return unguarded(self, request, queryset)

    action.__name__ = name
    action.__doc__ = unguarded.__doc__
    action.sluice_guarded = True  # what sluice.W002 looks for
    return admin.action(description=unguarded.short_description)(action)


class GuardedPeriodicTaskAdmin(PeriodicTaskAdmin):
    """PeriodicTaskAdmin whose enable/disable/toggle/run actions need the change permission when the selection
    includes one of Sluice's tasks. Other tasks keep django-celery-beat's behaviour."""

    enable_tasks = _guarded("enable_tasks")
    disable_tasks = _guarded("disable_tasks")
    toggle_tasks = _guarded("toggle_tasks")
    run_tasks = _guarded("run_tasks")
