// The inbox bell's script (notifications/templates/sluice/inbox/bell.html): no framework, no build step.
// It polls the unread count (with If-None-Match, so an unchanged count is a 304), loads the latest items when the
// dropdown opens, and marks all read up to the newest item it showed. An item with a link links to its open URL
// (/api/inbox/<id>/open/), which marks it read on the server and redirects to the item's own link: that holds for a
// click, a middle click, "open in a new tab" or a keyboard, and the page it lands on counts it read already. An item
// without a link is marked read when clicked.
(function () {
  "use strict";

  var UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60]];

  // "5 minutes ago" in the page's language (its <html lang>), or the local date and time without Intl.
  function ago(when) {
    var seconds = (when.getTime() - Date.now()) / 1000;
    if (!(window.Intl && Intl.RelativeTimeFormat)) return when.toLocaleString();
    var format = new Intl.RelativeTimeFormat(document.documentElement.lang || undefined, { numeric: "auto" });
    for (var i = 0; i < UNITS.length; i++) {
      if (Math.abs(seconds) >= UNITS[i][1]) return format.format(Math.round(seconds / UNITS[i][1]), UNITS[i][0]);
    }
    return format.format(0, "second");
  }

  function time(iso) {
    var when = new Date(iso);
    var el = document.createElement("time");
    el.className = "sluice-bell__item-time";
    el.dateTime = iso;
    el.title = when.toLocaleString();
    el.textContent = ago(when);
    return el;
  }

  function setCount(bell, count) {
    var badge = bell.querySelector(".sluice-bell__count");
    badge.setAttribute("data-count", String(count));
    badge.textContent = count > 99 ? "99+" : String(count);
  }

  function text(tag, cls, value) {
    var el = document.createElement(tag);
    el.className = cls;
    el.textContent = value; // never innerHTML: titles and bodies are the event's text
    return el;
  }

  function Bell(bell) {
    var etag = null;
    var newest = null;
    var panel = bell.querySelector(".sluice-bell__panel");
    var button = bell.querySelector(".sluice-bell__button");
    var list = bell.querySelector(".sluice-bell__list");

    function poll() {
      var headers = etag ? { "If-None-Match": etag } : {};
      return fetch(bell.dataset.unreadUrl, { credentials: "same-origin", headers: headers })
        .then(function (response) {
          if (response.status !== 200) return;
          etag = response.headers.get("ETag");
          return response.json().then(function (body) { setCount(bell, body.unread); });
        })
        .catch(function () {}); // the next poll tries again
    }

    function render(items) {
      list.textContent = "";
      newest = items.length ? items[0].id : null;
      if (!items.length) list.appendChild(text("span", "sluice-bell__empty", bell.dataset.empty));
      items.forEach(function (item) {
        var row = document.createElement(item.url ? "a" : "span");
        row.className = "sluice-bell__item" + (item.read ? "" : " sluice-bell__item--unread");
        if (item.url) row.href = bell.dataset.openUrl.replace("{id}", String(item.id));
        else if (!item.read) row.addEventListener("click", function () { markRead({ ids: [item.id] }); });
        row.appendChild(text("span", "sluice-bell__item-title", item.title));
        if (item.body) row.appendChild(text("span", "sluice-bell__item-body", item.body));
        row.appendChild(time(item.happened_at || item.updated_at));
        list.appendChild(row);
      });
    }

    function load() {
      return fetch(bell.dataset.itemsUrl + "?limit=10", { credentials: "same-origin" })
        .then(function (response) { return response.json(); })
        .then(function (body) { render(body.items || []); setCount(bell, body.unread); });
    }

    function markRead(which) {
      return fetch(bell.dataset.readUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": bell.dataset.csrf },
        body: JSON.stringify(which),
      })
        .then(function (response) { return response.json(); })
        .then(function (body) { setCount(bell, body.unread); return load(); });
    }

    function markAllRead() {
      if (newest === null) return Promise.resolve();
      return markRead({ up_to: newest });
    }

    // The panel hangs from the bell's right edge; on a narrow screen, with the bell left of the middle, that runs
    // off the left side: move it right until it is 8 px from the edge.
    function keepInView() {
      panel.style.right = "";
      var left = panel.getBoundingClientRect().left;
      if (left < 8) panel.style.right = left - 8 + "px";
    }

    button.addEventListener("click", function (event) {
      event.stopPropagation();
      var opening = panel.hidden;
      panel.hidden = !opening;
      button.setAttribute("aria-expanded", String(opening));
      if (opening) {
        keepInView();
        load();
      }
    });
    window.addEventListener("resize", function () { if (!panel.hidden) keepInView(); });
    bell.querySelector(".sluice-bell__mark-all").addEventListener("click", function (event) {
      event.stopPropagation();
      markAllRead();
    });
    panel.addEventListener("click", function (event) { event.stopPropagation(); });
    document.addEventListener("click", function () {
      panel.hidden = true;
      button.setAttribute("aria-expanded", "false");
    });
    poll();
    setInterval(poll, Number(bell.dataset.pollMs) || 30000);
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll(".sluice-bell"), Bell);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
