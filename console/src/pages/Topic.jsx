// Placeholder until the page is built.
export function Topic() {
  return <h1>Topic</h1>;
}
