// Keyboard review of a proposal: j/k move, x excludes, i includes, e edits the merged
// text, Space ticks for a bulk action, ? shows the keys. Everything also works with the mouse
// and without this file (every action is a form with a working action/href).
(function () {
  "use strict";
  var ROW = "[data-rv-op]";
  var lastFocused = null;

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#review-list " + ROW)); }
  function current() {
    var el = document.activeElement;
    return el && el.closest ? el.closest(ROW) : null;
  }
  function focusRow(row) {
    if (!row) return;
    row.focus();
    row.scrollIntoView({ block: "nearest" });
  }
  function move(step) {
    var all = rows();
    if (!all.length) return;
    var at = all.indexOf(current());
    if (at === -1) {
      var remembered = lastFocused && document.getElementById(lastFocused);
      at = remembered ? all.indexOf(remembered) : -1;
      focusRow(all[at === -1 ? 0 : at]);
      return;
    }
    focusRow(all[Math.max(0, Math.min(all.length - 1, at + step))]);
  }
  function act(action) {
    var row = current();
    if (!row) return;
    var button = row.querySelector('[data-review-action="' + action + '"]');
    if (!button) return;
    // A key pressed right after a swap can reach a row htmx has not processed yet; its form would
    // then be submitted natively (a page load). Processing it first is idempotent.
    if (window.htmx) window.htmx.process(row);
    button.click();
  }
  function edit() {
    var row = current();
    if (!row) return;
    var texts = row.querySelector("details.rv-texts");
    var box = row.querySelector("details[data-rv-edit]");
    if (!box) return;
    if (texts) texts.open = true;
    box.open = true;
    var area = box.querySelector("textarea");
    if (area) area.focus();
  }
  function toggleKeys() {
    var dialog = document.getElementById("review-keys");
    if (!dialog) return;
    if (dialog.open) dialog.close(); else dialog.showModal();
  }
  function typing(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
    if (!document.getElementById("review-panel")) return;
    switch (ev.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "x": act("exclude"); break;
      case "i": act("include"); break;
      case "e": edit(); break;
      case "?": toggleKeys(); break;
      case " ": {
        var row = current();
        if (!row || ev.target !== row) return;
        var box = row.querySelector("[data-rv-check]");
        if (box) box.checked = !box.checked;
        break;
      }
      default: return;
    }
    ev.preventDefault();
  });

  document.addEventListener("focusin", function (ev) {
    var row = ev.target && ev.target.closest ? ev.target.closest(ROW) : null;
    if (row) lastFocused = row.id;
  });

  // After the panel is swapped (exclude, filter, page), give the focus back to the same row.
  document.addEventListener("htmx:afterSettle", function () {
    if (!lastFocused) return;
    var active = document.activeElement;
    if (active && active !== document.body && document.contains(active)) return;
    var row = document.getElementById(lastFocused);
    if (row) row.focus({ preventScroll: true });
  });

  document.addEventListener("click", function (ev) {
    var t = ev.target;
    if (t && t.closest && t.closest("[data-keys-toggle]")) { toggleKeys(); return; }
  });

  // A review action refreshes the changed rows of "All operations" out of band: say which rows
  // the page holds (a group never opened has none), so none is sent without a target.
  document.addEventListener("htmx:configRequest", function (ev) {
    if (ev.detail.verb !== "post" || !document.getElementById("review-panel")) return;
    var shown = [];
    document.querySelectorAll("#operations ~ details .op[id^='op-']").forEach(function (el) {
      shown.push(el.id.slice(3));
    });
    ev.detail.parameters.shown = shown.join(",");
    // … and which Review cards: a row excluded from "All operations" whose card is on another
    // page of the Review list must not come back out of band (htmx: oobErrorNoTarget #rv-N).
    var cards = [];
    document.querySelectorAll("#review-list .rv-op[id^='rv-']").forEach(function (el) {
      cards.push(el.id.slice(3));
    });
    ev.detail.parameters.rv_shown = cards.join(",");
    // … and which groups' labels (a decision can make a kind the page has no group of).
    var kinds = [];
    document.querySelectorAll("[id^='group-label-']").forEach(function (el) {
      kinds.push(el.id.slice(12));
    });
    ev.detail.parameters.groups = kinds.join(",");
  });
  document.addEventListener("change", function (ev) {
    var t = ev.target;
    if (!t || !t.matches || !t.matches("[data-check-all]")) return;
    rows().forEach(function (row) {
      var box = row.querySelector("[data-rv-check]");
      if (box) box.checked = t.checked;
    });
  });
})();
