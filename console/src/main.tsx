// Entry point: mounts the console page.
import { render } from "preact";

import { App } from "./components/App";
import "./style.css";

const root = document.getElementById("app");
if (root) render(<App />, root);
