// Kubeconfig import: "select all" for the context checkboxes, and how many are chosen. Delegated
// from the document, since htmx swaps the form in after "Read contexts".
(function () {
  function boxes() {
    return Array.from(document.querySelectorAll('#import-body input[name="contexts"]'));
  }
  function updateCount() {
    const count = document.getElementById("contexts-count");
    if (count) {
      const all = boxes();
      count.textContent = all.filter((box) => box.checked).length + " of " + all.length + " contexts chosen";
    }
  }
  document.addEventListener("change", function (event) {
    if (event.target.id === "select-all-contexts") {
      boxes().forEach((box) => { box.checked = event.target.checked; });
    }
    updateCount();
  });
  document.addEventListener("htmx:afterSwap", updateCount);
  document.addEventListener("DOMContentLoaded", updateCount);
})();
