// truestack SVG flame graph: hover details, click to zoom, reset. No network access.
// Each frame is <g class="f" data-x data-w data-d data-n> holding <title>, <rect>, <text>;
// data-x/data-w are the unzoomed position and width in px, data-d the depth, data-n the label.
"use strict";
var truestackSvg = (function () {
  var svg = document.documentElement;
  var frames = Array.prototype.slice.call(document.querySelectorAll("g.f"));
  var details = document.getElementById("details");
  var unzoomButton = document.getElementById("unzoom");
  var pad = parseFloat(svg.getAttribute("data-pad"));
  var full = parseFloat(svg.getAttribute("data-width")) - 2 * pad;
  var charWidth = parseFloat(svg.getAttribute("data-char"));
  var zoomed = null;

  function num(g, key) { return parseFloat(g.getAttribute("data-" + key)); }

  function place(g, x, w) {
    var rect = g.querySelector("rect"), text = g.querySelector("text");
    rect.setAttribute("x", x.toFixed(2));
    rect.setAttribute("width", Math.max(w, 0).toFixed(2));
    text.setAttribute("x", (x + 3).toFixed(2));
    var label = g.getAttribute("data-n"), fit = Math.floor((w - 6) / charWidth);
    text.textContent = fit >= label.length ? label : fit < 3 ? "" : label.slice(0, fit - 2) + "..";
  }

  function zoom(g) {
    var x0 = num(g, "x"), w0 = num(g, "w"), d0 = num(g, "d"), eps = 1e-6;
    var scale = full / w0;
    frames.forEach(function (f) {
      var x = num(f, "x"), w = num(f, "w"), d = num(f, "d");
      f.classList.remove("parent", "hide");
      if (d < d0 && x <= x0 + eps && x + w >= x0 + w0 - eps) {
        f.classList.add("parent");
        place(f, pad, full);
      } else if (d >= d0 && x >= x0 - eps && x + w <= x0 + w0 + eps) {
        place(f, pad + (x - x0) * scale, w * scale);
      } else {
        f.classList.add("hide");
      }
    });
    zoomed = g;
    unzoomButton.classList.remove("hide");
  }

  function unzoom() {
    frames.forEach(function (f) {
      f.classList.remove("parent", "hide");
      place(f, num(f, "x"), num(f, "w"));
    });
    zoomed = null;
    unzoomButton.classList.add("hide");
  }

  frames.forEach(function (g) {
    g.addEventListener("click", function () { zoom(g); });
    g.addEventListener("mouseover", function () {
      details.textContent = g.querySelector("title").textContent.replace(/\n/g, " | ");
    });
    g.addEventListener("mouseout", function () { details.textContent = " "; });
  });
  unzoomButton.addEventListener("click", unzoom);
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") unzoom(); });

  return {
    ready: true,
    zoom: zoom,
    unzoom: unzoom,
    zoomed: function () { return zoomed ? zoomed.getAttribute("data-n") : null; },
  };
})();
