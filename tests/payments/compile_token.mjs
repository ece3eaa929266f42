// Compiles the tests' ERC-20 token, OpenZeppelin's audited ERC20 with 6 decimals and a supply
// minted to its deployer, with the pinned solc (package.json), offline; prints {abi, bytecode}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const solc = require("solc");
const modules = join(dirname(require.resolve("solc/package.json")), "..");

const source = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
contract TestDollar is ERC20 {
    constructor(uint256 supply) ERC20("Test Dollar", "TUSD") { _mint(msg.sender, supply); }
    function decimals() public pure override returns (uint8) { return 6; }
}
`;
const input = {
  language: "Solidity",
  sources: { "TestDollar.sol": { content: source } },
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};
function findImports(path) {
  try {
    return { contents: readFileSync(join(modules, path), "utf8") };
  } catch {
    return { error: `not found: ${path}` };
  }
}
const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
const errors = (output.errors || []).filter((e) => e.severity === "error");
if (errors.length) {
  console.error(errors.map((e) => e.formattedMessage).join("\n"));
  process.exit(1);
}
const contract = output.contracts["TestDollar.sol"].TestDollar;
process.stdout.write(
  JSON.stringify({ abi: contract.abi, bytecode: "0x" + contract.evm.bytecode.object }),
);
