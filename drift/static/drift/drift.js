/* Drift pages: draw every plotly figure found in the page (and in htmx swaps), and make the
   skew heatmap's cells open the pair's details through htmx. Figures are JSON in
   <script type="application/json"> blocks (json_script); plotly.js is served locally. */
(function () {
  "use strict";
  function draw(root) {
    if (!window.Plotly) { return; }
    root.querySelectorAll("[data-plotly-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.plotlyFigure);
      if (!source) { return; }
      var fig = JSON.parse(source.textContent);
      Plotly.react(el, fig.data, fig.layout, { responsive: true, displaylogo: false });
      if (el.dataset.pairUrl && !el.dataset.hooked) {
        el.dataset.hooked = "1";
        el.on("plotly_click", function (event) {
          var point = event.points && event.points[0];
          if (!point) { return; }
          var url = el.dataset.pairUrl
            .replace("__A__", encodeURIComponent(point.y))
            .replace("__B__", encodeURIComponent(point.x));
          if (window.htmx) {
            htmx.ajax("GET", url, { target: el.dataset.pairTarget || "#pair-detail", swap: "innerHTML" });
          } else {
            window.location.href = url;
          }
        });
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.target); });
})();
