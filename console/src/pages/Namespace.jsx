// Placeholder until the page is built.
export function Namespace() {
  return <h1>Namespace</h1>;
}
