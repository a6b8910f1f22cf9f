/* Page behaviour that used to be inline handlers (the Content-Security-Policy allows no inline
   script): delegated from the document, so rows added by htmx swaps work too.
   - <button data-print>: prints the page.
   - <button data-remove-row>: ticks the row's DELETE box (formset) and hides the row. */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target.closest("[data-print], [data-remove-row]") : null;
    if (!target) { return; }
    if (target.hasAttribute("data-print")) {
      window.print();
      return;
    }
    var row = target.closest("tr");
    if (!row) { return; }
    var box = row.querySelector("input[name$=DELETE]");
    if (box) { box.checked = true; }
    row.hidden = true;
  });
})();
