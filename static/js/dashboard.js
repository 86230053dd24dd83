// Dashboard charts (Chart.js from static/vendor, installed by the Makefile). Without it the page
// still works: the counts stay as text under the chart boxes.
(function () {
  "use strict";
  var charts = [];
  function draw() {
    var holder = document.getElementById("agent-chart");
    var dataEl = document.getElementById("chart-data");
    if (!holder || !dataEl) return;
    if (typeof window.Chart === "undefined") {
      holder.querySelectorAll(".chart-box").forEach(function (b) {
        b.style.height = "auto";
        b.textContent = "Chart library not installed (run make install); figures below.";
      });
      return;
    }
    charts.forEach(function (c) { c.destroy(); });
    charts = [];
    var data = JSON.parse(dataEl.textContent);
    var sizeCanvas = holder.querySelector('canvas[data-chart="samples"]');
    var lossCanvas = holder.querySelector('canvas[data-chart="passes"]');
    var fmt = function (t) { return new Date(t).toLocaleString(); };
    if (sizeCanvas) {
      charts.push(new window.Chart(sizeCanvas, {
        type: "line",
        data: {
          labels: data.samples.map(function (s) { return fmt(s.t); }),
          datasets: [{ label: "memories", data: data.samples.map(function (s) { return s.count; }),
            borderColor: "#2457c5", pointRadius: 2, tension: 0.1 }]
        },
        options: { maintainAspectRatio: false, animation: false, plugins: { legend: { display: false } } }
      }));
    }
    if (lossCanvas) {
      charts.push(new window.Chart(lossCanvas, {
        type: "bar",
        data: {
          labels: data.passes.map(function (p) { return "#" + p.id; }),
          datasets: [
            { label: "loss fraction", data: data.passes.map(function (p) { return p.loss; }),
              backgroundColor: data.passes.map(function (p) { return p.loss > p.threshold ? "#b42318" : "#2457c5"; }) },
            { type: "line", label: "threshold", data: data.passes.map(function (p) { return p.threshold; }),
              borderColor: "#1d2330", borderDash: [4, 3], pointRadius: 2, pointStyle: "line" }
          ]
        },
        options: { maintainAspectRatio: false, animation: false, scales: { y: { min: 0, max: 1 } } }
      }));
    }
  }
  window.addEventListener("load", draw);
  // The chart card is swapped by htmx when another agent is selected: redraw after a swap.
  document.addEventListener("htmx:afterSettle", draw);
})();
