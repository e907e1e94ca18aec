"""Admin pages read from Redis rather than a table (dead letters, providers): nothing to add, one view."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path


class RedisPageAdmin(admin.ModelAdmin):
    """The changelist is ``template`` filled by ``page(request)``; a POST goes to ``act(request)``."""

    template = ""

    def has_add_permission(self, request):
        return False

    def get_urls(self):
        # The page alone: the model has no table, so Django's change, delete and history views of one row would
        # query one that does not exist (a 500). Their URLs fall to the admin's catch-all: a 404.
        name = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        return [path("", self.admin_site.admin_view(self.changelist_view), name=name)]

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            return self.act(request)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "can_change": self.has_change_permission(request),
            **self.page(request),
            **(extra_context or {}),
        }
        return TemplateResponse(request, self.template, context)

    def page(self, request):
        """The page's own context: its title, what it shows, and ``redis_down`` when Redis cannot be read."""
        raise NotImplementedError

    def act(self, request):
        """Carry out a POSTed action, checking its own permission; answer with a redirect."""
        raise NotImplementedError
