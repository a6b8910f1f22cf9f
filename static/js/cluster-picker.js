// Placement cluster picker (resource form): search the cluster checkboxes by name or by label
// (k=v or k), tick/untick every match, and show how many clusters are ticked. Without JavaScript
// the plain checkbox list still works; the tools are shown only when this runs.
(function () {
  function setUp(picker) {
    const tools = picker.querySelector(".picker-tools");
    const search = picker.querySelector(".picker-search");
    const count = picker.querySelector(".picker-count");
    const options = Array.from(picker.querySelectorAll('input[type="checkbox"][data-labels]'));
    const row = (box) => box.closest("div") || box.parentElement;
    function matches(box) {
      const terms = search.value.trim().toLowerCase().split(/[\s,]+/).filter(Boolean);
      const labels = (box.dataset.labels || "").toLowerCase().split(" ");
      return terms.every((term) =>
        term.includes("=") ? labels.includes(term)
          : box.value.toLowerCase().includes(term) || labels.some((l) => l.split("=")[0] === term));
    }
    function refresh() {
      let shown = 0;
      options.forEach((box) => {
        const hit = matches(box);
        row(box).hidden = !hit;
        if (hit) shown += 1;
      });
      const ticked = options.filter((box) => box.checked).length;
      count.textContent = ticked + " of " + options.length + " clusters ticked" +
        (search.value.trim() ? " · " + shown + " match" : "");
    }
    function tickMatching(value) {
      options.filter(matches).forEach((box) => { box.checked = value; });
      refresh();
    }
    tools.hidden = false;
    search.addEventListener("input", refresh);
    search.addEventListener("keydown", (event) => { if (event.key === "Enter") event.preventDefault(); });
    picker.querySelector(".picker-select").addEventListener("click", () => tickMatching(true));
    picker.querySelector(".picker-clear").addEventListener("click", () => tickMatching(false));
    picker.addEventListener("change", refresh);
    refresh();
  }
  function init(root) {
    root.querySelectorAll(".picker:not([data-picker-ready])").forEach((picker) => {
      picker.setAttribute("data-picker-ready", "1");
      setUp(picker);
    });
  }
  document.addEventListener("DOMContentLoaded", () => init(document));
  document.addEventListener("htmx:afterSwap", (event) => init(event.target));
})();
