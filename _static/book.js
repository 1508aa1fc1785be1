// Every figure opens full size: an image shown smaller than it was drawn links to its own file.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("main img").forEach((img) => {
    if (img.closest("a")) return;
    const link = document.createElement("a");
    link.href = img.currentSrc || img.src;
    link.className = "full-size";
    link.title = "Open the figure at full size";
    img.parentNode.insertBefore(link, img);
    link.appendChild(img);
  });
});
