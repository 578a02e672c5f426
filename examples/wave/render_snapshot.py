"""Renders one time step of a deepgrid snapshot series as ParaView would show it, without a
display (VTK's off-screen rendering): a slice through the wavefield in a diverging colour map,
the model's outline, labelled axes in metres, a colour bar and a title.

    python render_snapshot.py SERIES.vtkhdf OUT.png [--field u] [--step N]

Needs the vtk wheel (pip install vtk). ParaView itself opens SERIES.vtkhdf as an animation.
"""

import argparse

import vtk
from vtk.util.numpy_support import vtk_to_numpy


def read(series, step):
    reader = vtk.vtkHDFReader()
    reader.SetFileName(series)
    reader.UpdateInformation()
    times = reader.GetOutputInformation(0).Get(vtk.vtkStreamingDemandDrivenPipeline.TIME_STEPS())
    time = times[-1] if step is None else float(step)
    if time not in times:
        raise SystemExit(f"{series} holds steps {', '.join(str(int(t)) for t in times)}, not {step}")
    reader.UpdateTimeStep(time)
    return reader, time


def slice_actor(reader, field, normal, limit):
    image = reader.GetOutput()
    cut = vtk.vtkCutter()
    plane = vtk.vtkPlane()
    plane.SetOrigin(image.GetCenter())
    plane.SetNormal(*normal)
    cut.SetCutFunction(plane)
    cut.SetInputConnection(reader.GetOutputPort())
    colours = vtk.vtkColorTransferFunction()  # blue - white - red, as ParaView's "Cool to Warm"
    colours.SetColorSpaceToDiverging()
    colours.AddRGBPoint(-limit, 0.23, 0.30, 0.75)
    colours.AddRGBPoint(0.0, 0.87, 0.87, 0.87)
    colours.AddRGBPoint(limit, 0.71, 0.02, 0.15)
    mapper = vtk.vtkPolyDataMapper()
    mapper.SetInputConnection(cut.GetOutputPort())
    mapper.SetScalarModeToUsePointFieldData()
    mapper.SelectColorArray(field)
    mapper.SetLookupTable(colours)
    mapper.SetScalarRange(-limit, limit)
    actor = vtk.vtkActor()
    actor.SetMapper(mapper)
    return actor, colours


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("series")
    p.add_argument("out")
    p.add_argument("--field", default="u")
    p.add_argument("--step", type=int)
    a = p.parse_args()
    reader, time = read(a.series, a.step)
    image = reader.GetOutput()
    cy = image.GetCenter()[1]
    values = vtk_to_numpy(image.GetPointData().GetArray(a.field))
    limit = float(abs(values).max()) or 1.0

    renderer = vtk.vtkRenderer()
    renderer.SetBackground(1, 1, 1)
    colours = None
    actor, colours = slice_actor(reader, a.field, (0, 1, 0), limit)  # the x-z plane, y = mid
    actor.GetProperty().LightingOff()
    renderer.AddActor(actor)
    outline = vtk.vtkOutlineFilter()
    outline.SetInputConnection(reader.GetOutputPort())
    outline_mapper = vtk.vtkPolyDataMapper()
    outline_mapper.SetInputConnection(outline.GetOutputPort())
    outline_actor = vtk.vtkActor()
    outline_actor.SetMapper(outline_mapper)
    outline_actor.GetProperty().SetColor(0.2, 0.2, 0.2)
    renderer.AddActor(outline_actor)

    axes = vtk.vtkCubeAxesActor()
    axes.SetBounds(image.GetBounds())
    axes.SetCamera(renderer.GetActiveCamera())
    axes.SetXTitle("x (m)")
    axes.SetYTitle("y (m)")
    axes.SetZTitle("z (m)")
    for i in range(3):
        axes.GetTitleTextProperty(i).SetColor(0, 0, 0)
        axes.GetLabelTextProperty(i).SetColor(0, 0, 0)
    axes.GetXAxesLinesProperty().SetColor(0, 0, 0)
    axes.GetYAxesLinesProperty().SetColor(0, 0, 0)
    axes.GetZAxesLinesProperty().SetColor(0, 0, 0)
    axes.SetFlyModeToClosestTriad()
    axes.YAxisVisibilityOff()
    renderer.AddActor(axes)

    bar = vtk.vtkScalarBarActor()
    bar.SetLookupTable(colours)
    bar.SetTitle(a.field)
    bar.SetNumberOfLabels(5)
    bar.SetUnconstrainedFontSize(True)
    bar.GetTitleTextProperty().SetFontSize(16)
    bar.GetLabelTextProperty().SetFontSize(13)
    bar.GetTitleTextProperty().SetColor(0, 0, 0)
    bar.GetLabelTextProperty().SetColor(0, 0, 0)
    bar.SetWidth(0.08)
    bar.SetPosition(0.88, 0.15)
    renderer.AddViewProp(bar)

    title = vtk.vtkTextActor()
    title.SetInput(f"{a.field} at step {int(time)}, slice y = {cy:g} m ({a.series})")
    title.GetTextProperty().SetColor(0, 0, 0)
    title.GetTextProperty().SetFontSize(18)
    title.SetPosition(10, 10)
    renderer.AddViewProp(title)

    # Looking along -y at the x-z plane, depth (z) growing downwards as in seismic sections.
    camera = renderer.GetActiveCamera()
    cx, cy, cz = image.GetCenter()
    camera.SetFocalPoint(cx, cy, cz)
    camera.SetPosition(cx, cy + 10 * max(image.GetBounds()), cz)
    camera.ParallelProjectionOn()
    camera.SetViewUp(0, 0, -1)
    renderer.ResetCamera()
    camera.Zoom(1.1)

    window = vtk.vtkRenderWindow()
    window.SetOffScreenRendering(1)
    window.AddRenderer(renderer)
    window.SetSize(900, 650)
    window.Render()
    shot = vtk.vtkWindowToImageFilter()
    shot.SetInput(window)
    writer = vtk.vtkPNGWriter()
    writer.SetFileName(a.out)
    writer.SetInputConnection(shot.GetOutputPort())
    writer.Write()
    print(f"wrote {a.out}: {a.field} at step {int(time)}")


if __name__ == "__main__":
    main()
