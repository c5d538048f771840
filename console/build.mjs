// Builds the console into dist/: one script, one style sheet, the page and its icon.
// The output depends only on the sources and the locked packages, so a fresh build
// (`npm ci && npm run build`) reproduces the committed dist/ byte for byte.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

// `--out DIR` builds elsewhere (CI compares such a build with the committed dist/).
const at = process.argv.indexOf('--out');
const out = at > 0 ? process.argv[at + 1] : 'dist';
rmSync(out, { recursive: true, force: true });
mkdirSync(`${out}/assets`, { recursive: true });

const common = {
  bundle: true,
  minify: true,
  target: ['es2020', 'chrome110', 'firefox110', 'safari16'],
  legalComments: 'eof',
  logLevel: 'warning',
};

await build({
  ...common,
  entryPoints: ['src/main.jsx'],
  outfile: `${out}/assets/console.js`,
  format: 'esm',
  jsx: 'automatic',
  jsxImportSource: 'preact',
});
await build({
  ...common,
  entryPoints: ['src/styles.css'],
  outfile: `${out}/assets/console.css`,
});
copyFileSync('public/index.html', `${out}/index.html`);
copyFileSync('public/favicon.svg', `${out}/assets/favicon.svg`);

let total = 0;
for (const file of ['index.html', 'assets/console.js', 'assets/console.css', 'assets/favicon.svg']) {
  const bytes = readFileSync(`${out}/${file}`);
  const gzipped = gzipSync(bytes, { level: 9 }).length;
  total += gzipped;
  console.log(`${file.padEnd(20)} ${String(bytes.length).padStart(8)} B  ${String(gzipped).padStart(7)} B gzipped`);
}
console.log(`${'total'.padEnd(20)} ${''.padStart(8)}    ${String(total).padStart(7)} B gzipped`);
