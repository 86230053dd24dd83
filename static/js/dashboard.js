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
    // Same form as every other date on the console: ISO date and time, UTC (to the second
    // when the samples span less than a day, so two ticks never read the same minute).
    var fmt = function (t, seconds) {
      return new Date(t).toISOString().slice(0, seconds ? 19 : 16).replace("T", " ") + " UTC";
    };
    if (sizeCanvas) {
      // A time axis: x is epoch milliseconds on a linear scale (no date adapter is vendored),
      // so samples sit at their real times; straight segments (tension 0), so the line never
      // dips below the lowest sample between two of them.
      var points = data.samples.map(function (s) { return { x: Date.parse(s.t), y: s.count }; });
      var span = points.length ? points[points.length - 1].x - points[0].x : 0;
      charts.push(new window.Chart(sizeCanvas, {
        type: "line",
        data: { datasets: [{ label: "memories", data: points, borderColor: "#2457c5",
          pointRadius: 2, tension: 0, cubicInterpolationMode: "default" }] },
        options: { maintainAspectRatio: false, animation: false, parsing: false,
          scales: { x: { type: "linear", ticks: { maxTicksLimit: 6, maxRotation: 0,
            callback: function (v) { return fmt(v, span < 86400000); } } } },
          plugins: { legend: { display: false },
            tooltip: { callbacks: { title: function (items) { return fmt(items[0].parsed.x, true); } } } } }
      }));
    }
    if (lossCanvas) {
      charts.push(new window.Chart(lossCanvas, {
        type: "bar",
        data: {
          labels: data.passes.map(function (p) { return "#" + p.id; }),
          datasets: [
            { label: "loss fraction", data: data.passes.map(function (p) { return p.loss; }),
              backgroundColor: data.passes.map(function (p) { return p.loss > p.threshold ? "#b42318" : "#2457c5"; }) }
          ]
        },
        options: { maintainAspectRatio: false, animation: false, scales: { y: { min: 0, max: 1 } },
          plugins: { legend: { display: false } } },
        plugins: [thresholdLine(data.passes)]
      }));
    }
  }
  // The loss threshold as a dashed horizontal line across each pass's whole column (a line
  // dataset would be a lone dot for a single pass); it steps where a policy changed it.
  function thresholdLine(passes) {
    return {
      id: "thresholdLine",
      afterDatasetsDraw: function (chart) {
        var x = chart.scales.x, y = chart.scales.y, ctx = chart.ctx, area = chart.chartArea;
        if (!passes.length) return;
        var step = passes.length > 1 ? x.getPixelForValue(1) - x.getPixelForValue(0) : area.right - area.left;
        ctx.save();
        ctx.strokeStyle = "#1d2330";
        ctx.lineWidth = 1.5;
        ctx.setLineDash([5, 4]);
        ctx.beginPath();
        passes.forEach(function (p, i) {
          var cx = x.getPixelForValue(i), yy = y.getPixelForValue(p.threshold);
          var left = Math.max(area.left, cx - step / 2), right = Math.min(area.right, cx + step / 2);
          if (i === 0) ctx.moveTo(left, yy); else ctx.lineTo(left, yy);
          ctx.lineTo(right, yy);
        });
        ctx.stroke();
        ctx.restore();
      }
    };
  }
  window.addEventListener("load", draw);
  // The chart card is swapped by htmx when another agent is selected: redraw after a swap.
  document.addEventListener("htmx:afterSettle", draw);
})();
