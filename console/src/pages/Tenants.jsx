// Placeholder until the page is built.
export function Tenants() {
  return <h1>Tenants</h1>;
}
