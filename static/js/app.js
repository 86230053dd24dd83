// memoryadmin: small progressive enhancements. Everything works without this file.
(function () {
  "use strict";
  // The operator's time zone, for schedule previews: fill every <input data-browser-tz>.
  function fillTimeZones(root) {
    var tz = "";
    try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { tz = ""; }
    if (!tz) return;
    // Stored URL-encoded ("America%2FNew_York"): compare in the same form, or every page rewrites it.
    if (document.cookie.indexOf("tz=" + encodeURIComponent(tz)) === -1) {
      document.cookie = "tz=" + encodeURIComponent(tz) + "; path=/; max-age=31536000; SameSite=Lax";
      // A page the server drew in another zone (the first visit, before the cookie) is drawn
      // again once, now in this one; only a GET page says its zone (a reload re-posts nothing).
      var shown = root === document && document.body ? document.body.dataset.serverTz : "";
      var again = "";
      try { again = window.sessionStorage.getItem("tz-reloaded") || ""; } catch (e) { again = tz; }
      if (shown && shown !== tz && again !== tz) {
        try { window.sessionStorage.setItem("tz-reloaded", tz); } catch (e) { return; }
        window.location.reload();
        return;
      }
    }
    (root || document).querySelectorAll("input[data-browser-tz]").forEach(function (el) {
      if (!el.value) el.value = tz;
    });
  }
  document.addEventListener("DOMContentLoaded", function () { fillTimeZones(document); });
  // <form data-confirm="Question?">: ask before submitting (inline onsubmit= is barred by the CSP).
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form && form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
    }
  }, true);
  // htmx leaves 4xx responses unswapped; a 403 that names its own target (HX-Retarget: the
  // stale-CSRF message with its reload link) is shown there instead of failing silently.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var xhr = ev.detail.xhr;
    if (xhr && xhr.status === 403 && xhr.getResponseHeader("HX-Retarget")) {
      ev.detail.shouldSwap = true;
      ev.detail.isError = false;
    }
  });
  document.addEventListener("htmx:load", function (ev) { fillTimeZones(ev.target); });
})();
