// Hash routes, so the broker serves one index.html for every page and a reload keeps the view:
//   #/cluster  #/tenants?q=  #/namespace/<t>/<ns>  #/topic/<t>/<ns>/<topic>/<tab>
//   #/security  #/audit  #/login
import { useEffect, useState } from "preact/hooks";

export function parseHash(hash = window.location.hash) {
  const [pathPart, queryPart = ""] = hash.replace(/^#\/?/, "").split("?");
  const parts = pathPart.split("/").filter(Boolean).map(decodeURIComponent);
  const query = Object.fromEntries(new URLSearchParams(queryPart));
  return { page: parts[0] || "cluster", args: parts.slice(1), query };
}

export function href(page, args = [], query = {}) {
  const path = [page, ...args.map((a) => encodeURIComponent(a))].join("/");
  const qs = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== "")).toString();
  return `#/${path}${qs ? `?${qs}` : ""}`;
}

export function navigate(page, args = [], query = {}) {
  window.location.hash = href(page, args, query);
}

export function useRoute() {
  const [route, setRoute] = useState(parseHash());
  useEffect(() => {
    const on = () => setRoute(parseHash());
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return route;
}
