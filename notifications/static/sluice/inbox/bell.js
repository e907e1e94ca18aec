// The inbox bell's script (notifications/templates/sluice/inbox/bell.html): no framework, no build step.
// It polls the unread count (with If-None-Match, so an unchanged count is a 304), loads the latest items when the
// dropdown opens, and marks all read up to the newest item it showed.
(function () {
  "use strict";

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
        if (item.url) row.href = item.url;
        row.appendChild(text("span", "sluice-bell__item-title", item.title));
        if (item.body) row.appendChild(text("span", "sluice-bell__item-body", item.body));
        list.appendChild(row);
      });
    }

    function load() {
      return fetch(bell.dataset.itemsUrl + "?limit=10", { credentials: "same-origin" })
        .then(function (response) { return response.json(); })
        .then(function (body) { render(body.items || []); setCount(bell, body.unread); });
    }

    function markAllRead() {
      if (newest === null) return Promise.resolve();
      return fetch(bell.dataset.readUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": bell.dataset.csrf },
        body: JSON.stringify({ up_to: newest }),
      })
        .then(function (response) { return response.json(); })
        .then(function (body) { setCount(bell, body.unread); return load(); });
    }

    button.addEventListener("click", function (event) {
      event.stopPropagation();
      var opening = panel.hidden;
      panel.hidden = !opening;
      button.setAttribute("aria-expanded", String(opening));
      if (opening) load();
    });
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
