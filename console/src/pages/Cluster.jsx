// Placeholder until the page is built.
export function Cluster() {
  return <h1>Cluster</h1>;
}
