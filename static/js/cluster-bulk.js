// Cluster list, bulk labels (admins): "tick every cluster on this page" and the live count of
// ticked clusters on the Apply button. The rows are re-rendered by htmx (filters, polling), so the
// listeners are delegated from the document.
(function () {
  function boxes() {
    return Array.from(document.querySelectorAll('input[name="ids"][form="bulk-labels"]'));
  }
  function updateCount() {
    const count = document.getElementById("bulk-count");
    const all = document.getElementById("id_bulk_all");
    if (!count) return;
    if (all && all.checked) {
      count.textContent = "every cluster matching the filter";
      return;
    }
    const ticked = boxes().filter((box) => box.checked).length;
    count.textContent = ticked === 0 ? "the ticked clusters" : ticked + (ticked === 1 ? " cluster" : " clusters");
  }
  document.addEventListener("change", function (event) {
    if (event.target.id === "select-page") {
      boxes().forEach((box) => { box.checked = event.target.checked; });
    }
    updateCount();
  });
  document.addEventListener("htmx:afterSwap", updateCount);
})();
