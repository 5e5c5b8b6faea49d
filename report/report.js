(function () {
  "use strict";
  var buttons = document.querySelectorAll(".filters button[data-filter]");
  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      var f = b.getAttribute("data-filter");
      buttons.forEach(function (o) { o.classList.toggle("on", o === b); });
      document.body.setAttribute("data-filter", f);
    });
  });
  var expand = document.querySelector(".filters button[data-expand]");
  if (expand) {
    expand.addEventListener("click", function () {
      var open = expand.getAttribute("data-expand") === "1";
      document.querySelectorAll("details.job").forEach(function (d) { d.open = open; });
      expand.setAttribute("data-expand", open ? "0" : "1");
      expand.textContent = open ? "collapse all" : "expand all";
    });
  }
  document.querySelectorAll("a.jobid").forEach(function (a) {
    a.addEventListener("click", function () {
      var d = document.getElementById(a.getAttribute("href").slice(1));
      if (d) { d.open = true; }
    });
  });
})();
