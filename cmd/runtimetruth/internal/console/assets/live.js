// live.js applies the console's live updates to the page it is loaded by:
// the Server-Sent Events of GET /events, one "verdict" event per verdict
// the verifier stores, from the revision the page was rendered at (the
// data-live-after attribute). The browser's EventSource reconnects by
// itself and sends the last event id it saw, so no verdict is missed.
// The page works without it: it only saves a reload. Text is set with
// textContent, never parsed as HTML.
(function () {
  "use strict";
  var root = document.querySelector("[data-live-after]");
  if (!root || !window.EventSource) {
    return;
  }
  var news = document.getElementById("live-news");
  var fresh = 0;
  var source = new EventSource("/events?after=" + encodeURIComponent(root.getAttribute("data-live-after")));

  function say(text) {
    if (news) {
      news.textContent = text;
      news.hidden = false;
    }
  }

  function badge(el, status) {
    el.className = "badge " + status;
    el.textContent = status;
  }

  function count(status, by) {
    var el = document.querySelector('[data-count="' + status + '"]');
    if (el) {
      el.textContent = String(Number(el.textContent) + by);
    }
  }

  function short(text, n) {
    return text.length > n ? text.slice(0, n) + "\u2026" : text;
  }

  function fleetRow(row, v) {
    var was = row.getAttribute("data-status");
    if (was !== v.status) {
      count(was, -1);
      count(v.status, 1);
      row.setAttribute("data-status", v.status);
    }
    badge(row.querySelector(".status .badge"), v.status);
    var seen = row.querySelector(".seen time");
    seen.setAttribute("datetime", v.seen);
    seen.title = v.seen;
    seen.textContent = "0s ago";
    var digest = row.querySelector(".digest code");
    digest.title = v.digest;
    digest.textContent = short(v.digest, 19);
    row.querySelector(".detail").textContent = v.detail;
    row.classList.add("updated");
  }

  source.addEventListener("verdict", function (e) {
    var v = JSON.parse(e.data);
    var key = root.getAttribute("data-live-key");
    if (key !== null) { // a target's page
      if (v.key !== key) {
        return;
      }
      badge(root.querySelector(".badge"), v.status);
      if (v.digest !== root.getAttribute("data-digest")) {
        say("New verdict " + v.status + " at " + v.verdict + " for snapshot " + v.digest +
          ": reload to review it (an approval of the snapshot shown is refused if its evidence changed).");
      }
      return;
    }
    var row = null;
    var rows = document.querySelectorAll("tr[data-key]");
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute("data-key") === v.key) {
        row = rows[i];
      }
    }
    if (row) {
      fleetRow(row, v);
    } else {
      fresh++;
      say(fresh + " verdict(s) for targets not on this page (the latest: " + v.status + ", " + v.host + "); reload to see them.");
    }
  });
})();
