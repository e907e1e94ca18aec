"""The inbox API's routes, included by notifications.urls under inbox/."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.items, name="inbox"),
    path("unread/", views.unread_count, name="inbox_unread"),
    path("read/", views.mark_read, name="inbox_read"),
    path("archive/", views.archive, name="inbox_archive"),
    path("<int:item_id>/open/", views.open_item, name="inbox_open"),
]
