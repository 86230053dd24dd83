// memoryadmin: small progressive enhancements. Everything works without this file.
(function () {
  "use strict";
  // The operator's time zone, for schedule previews: fill every <input data-browser-tz>.
  function fillTimeZones(root) {
    var tz = "";
    try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { tz = ""; }
    if (!tz) return;
    if (document.cookie.indexOf("tz=" + tz) === -1) {
      document.cookie = "tz=" + encodeURIComponent(tz) + "; path=/; max-age=31536000; SameSite=Lax";
    }
    (root || document).querySelectorAll("input[data-browser-tz]").forEach(function (el) {
      if (!el.value) el.value = tz;
    });
  }
  document.addEventListener("DOMContentLoaded", function () { fillTimeZones(document); });
  document.addEventListener("htmx:load", function (ev) { fillTimeZones(ev.target); });
})();
